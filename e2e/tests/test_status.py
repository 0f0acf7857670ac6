"""`make status` against the real control plane and a Cloud Storage emulator: every phase a run goes through;
then, on the runs it left, the run commands (`make logs`, `make status WAIT=1`, `make inspect`).

The shipped `tpu-queued` stack with runs made to land in each phase: four
runs on the capacity ladder (Spot, on demand and queued rungs of one slice
each), so two are admitted (whichever Kueue takes first), one waits on its ProvisioningRequest (the
harness's provisioner holds it) and one waits for quota; two single-host
runs outside Kueue, one failing with the trainers' configuration error (78),
one finishing. One run's pod is deleted for a restart: no ETA then, but since
when and why it does not progress. Progress records are written by the JAX
trainer's own progress code and uploaded to the bucket the status command reads
through the Cloud Storage client. The kubeconfig's current context is another
cluster (a closed port); status reads the context `gcloud container clusters
get-credentials` would write for the stack's own cluster, and says so.

The pods' logs are files kwok serves on the kubelet API, read through the API
server's `pods/log` (e2e/harness/pod_logs.py): the failed run's log ends with
the trainer's own configuration error, a multi-host run's two processes log
their steps, and a restart's new pods log again.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml

from core.names import checkpoint_prefix
from e2e.harness import fake_gcs
from e2e.harness.apply import apply_one
from e2e.harness.install import install_stack
from e2e.harness.kube import wait_for
from e2e.harness.observe import placements
from e2e.harness.session import control_plane
from e2e.harness.stack_objects import stack_objects
from e2e.harness.stages import COMPLETE_LABEL, FAIL_EXIT_CODE_ANNOTATION, FAIL_LABEL
from e2e.harness.tools import ROOT
from e2e.harness.pod_logs import write_lines
from e2e.tests.run_commands import Background, pods_of, process_pod, run_tool, serve
from e2e.tests.scenario import delete_and_wait
from e2e.tests.settings import LIFETIME
from e2e.tests.reports import Report
from tools.status.clock import SKEW_S
from tools.status.model import parse_time
from trainers.gemma_jax import flags as jax_flags
from trainers.progress import Progress

STACK = "tpu-queued"
# The context `gcloud container clusters get-credentials` writes for the stack's own cluster.
STACK_CONTEXT = "gke_my-project-id_us-east5_finetune-tpu-queued"
TIMEOUT = 120.0
STATUS_REPORT = Report("status")
HOSTS = 2  # a v6e 2x4 slice: two VMs, two processes
SECRET = "hf_" + "e2eNotARealToken" * 2  # must never reach what `make inspect` writes


def _runs() -> list[dict]:
    shipped = yaml.safe_load((ROOT / f"Pulumi.{STACK}.yaml").read_text())["config"]["gke-finetune:runs"]
    ladder, single = (next(r for r in shipped if ("ladder" in r) == is_ladder) for is_ladder in (True, False))
    runs = [{**copy.deepcopy(ladder), "name": f"ladder-{c}"} for c in "abcd"]
    runs += [{**copy.deepcopy(single), "name": name} for name in ("single-78", "single-ok")]
    return runs


def _status(root: Path, env: dict[str, str]) -> dict[str, dict]:
    done = subprocess.run([sys.executable, "-m", "tools.status", "show", "--stack", STACK, "--root", str(root),
                           "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"read context {STACK_CONTEXT} (the stack's own cluster" in done.stderr, done.stderr
    return {r["run"]: r for r in json.loads(done.stdout)}


def _kubeconfig(cp, path: Path) -> Path:
    """The control plane's kubeconfig with its context named as get-credentials names the stack's
    cluster's, and another cluster's context (a closed port) current."""
    config = json.loads(cp.kubeconfig.read_text())
    [cluster], [context] = config["clusters"], config["contexts"]
    cluster["name"] = context["name"] = context["context"]["cluster"] = STACK_CONTEXT
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"https://127.0.0.1:{s.getsockname()[1]}"
    config["clusters"].append({"name": "elsewhere", "cluster": {**cluster["cluster"], "server": closed}})
    config["contexts"].append({"name": "elsewhere", "context": {**context["context"], "cluster": "elsewhere"}})
    config["current-context"] = "elsewhere"
    path.write_text(json.dumps(config, indent=1))
    return path


def _table(root: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "tools.status", "show", "--stack", STACK, "--root", str(root), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def status_plane(state_root):
    runs = _runs()
    overrides = {"gke-finetune:runs": runs}
    objects = stack_objects(STACK, overrides_json=json.dumps(overrides))
    root = state_root / "status-stack"
    root.mkdir(parents=True)
    shutil.copy(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    config = yaml.safe_load((ROOT / f"Pulumi.{STACK}.yaml").read_text())
    config["config"].update(overrides)
    (root / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    with control_plane(state_root / "status", LIFETIME, serve_logs=True) as cp:
        gcs = fake_gcs.start(cp.supervisor, cp.tools)
        gcs.create_bucket(objects.config.data_bucket)
        (cp.state / "provisioner-mode").write_text("hold")  # no queued capacity ever comes
        kube = cp.client()
        install_stack(cp, kube, objects)
        kubeconfig = _kubeconfig(cp, state_root / "status-kubeconfig")
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), **gcs.env, "PYTHONPATH": str(ROOT)}
        yield kube, objects, root, env, gcs


def _record(gcs, bucket: str, run: str, tmp: Path, started: float, trained: float) -> dict:
    """A progress record as the JAX trainer writes it now, at step 40 of 100 after `trained` seconds of
    training since its first start at `started`, uploaded where the run's is."""
    directory = tmp / run
    now = time.time()
    progress = Progress(str(directory), "gemma-jax", total_steps=100, started=started, clock=lambda: now)
    progress.resumed(0)
    progress.first_step(1, loss=3.0)
    progress.trained(40, seconds=trained, loss=2.5, tokens_per_s=1200.0)
    progress.checkpointed(40)
    gcs.upload(bucket, f"{checkpoint_prefix(STACK, run)}/progress.json", (directory / "progress.json").read_bytes())
    return progress.record


def _pod(kube, namespace: str, run: str) -> str:
    return wait_for(f"a bound pod of {run}",
                    lambda: next((p.pod for p in placements(kube, namespace, run) if p.node), None), TIMEOUT)


def test_the_status_shows_each_phase_from_the_cluster_and_the_bucket(status_plane, tmp_path):
    kube, objects, root, env, gcs = status_plane
    ns = objects.runs_namespace
    ladder = [f"ladder-{c}" for c in "abcd"]

    def ladder_settled():
        found = _status(root, env)
        phases = sorted(found[run]["phase"] for run in ladder)
        return found if phases == ["running", "running", "waiting for capacity", "waiting for quota"] else None

    found = wait_for("the ladder's runs in their phases", ladder_settled, TIMEOUT,
                     explain=lambda: str({r: s["phase"] for r, s in _status(root, env).items()}))
    # Which two Kueue admits first is its business; they hold the first two rungs.
    running = [run for run in ladder if found[run]["phase"] == "running"]
    rungs = sorted((found[run]["rung"] or {}).get("pool", "") for run in running)
    assert rungs == ["spot-v6e-2x4", "v6e-2x4"], rungs
    capacity = next(s for s in found.values() if s["phase"] == "waiting for capacity")
    assert "ProvisioningRequest" in capacity["detail"] or "provisioning" in capacity["detail"].lower(), capacity
    assert capacity["progressing"] is False and capacity["stalled_why"].startswith("waiting for capacity"), capacity
    # The trainer of a running run writes its record; the status reads it from the bucket.
    assert found[running[0]]["step"] is None, found[running[0]]
    # Its trainer started a second after the JobSet was submitted and has trained half the time since.
    started = parse_time(found[running[0]]["submitted_at"]) + 1
    record = _record(gcs, objects.config.data_bucket, running[0], tmp_path, started, (time.time() - started) / 2)
    a = _status(root, env)[running[0]]
    assert (a["step"], a["total_steps"], a["tokens_per_s"], a["loss"]) == (40, 100, 1200.0, 2.5), a
    assert a["checkpoint_step"] == record["checkpoint_step"] == 40
    assert a["chips"] == 8 and a["usd_high"] > 0, a
    STATUS_REPORT.append(_table(root, env))

    assert a["progressing"] is True and a["eta_seconds"] is not None and a["notes"] == [], a

    # A restart: an admitted run's pod deleted (kwok plays the kubelet: SIGTERM's 143). Its new pods
    # start after the record's last write (whole seconds, a clock skew allowance past it), so the run
    # does not progress until its trainer writes again: no ETA, since when and why.
    restarted = running[0]
    time.sleep(max(0.0, parse_time(record["updated_at"]) + SKEW_S + 1 - time.time()))
    kube.delete("v1", "Pod", _pod(kube, ns, restarted), ns)
    wait_for(f"{restarted} restarted", lambda: _status(root, env)[restarted]["restarts"] >= 1, TIMEOUT,
             explain=lambda: str(_status(root, env)[restarted]))
    stalled = wait_for(f"{restarted} not progressing", lambda: (
        lambda s: s if s["progressing"] is False else None)(_status(root, env)[restarted]), TIMEOUT,
        explain=lambda: str(_status(root, env)[restarted]))
    assert stalled["eta_seconds"] is None and stalled["stalled_since"] == record["updated_at"], stalled
    assert stalled["stalled_why"], stalled
    STATUS_REPORT.append(_table(root, env, "--run", restarted))

    # The single-host pool's one node: single-78 first fails with 78, then single-ok runs and finishes.
    first = wait_for("a single-host run bound", lambda: next(
        (r for r in ("single-78", "single-ok") for p in placements(kube, ns, r) if p.node), None), TIMEOUT)
    order = [first, "single-ok" if first == "single-78" else "single-78"]
    for run in order:
        pod = _pod(kube, ns, run)
        if run == "single-78":
            kube.patch("v1", "Pod", pod, ns, {"metadata": {"annotations": {FAIL_EXIT_CODE_ANNOTATION: "78"},
                                                           "labels": {FAIL_LABEL: "true"}}})
        else:
            kube.patch("v1", "Pod", pod, ns, {"metadata": {"labels": {COMPLETE_LABEL: "true"}}})
    final = wait_for("single-78 failed and single-ok succeeded", lambda: (
        lambda s: s if s["single-78"]["phase"] == "failed" and s["single-ok"]["phase"] == "succeeded" else None)(
        _status(root, env)), TIMEOUT, explain=lambda: str({r: (s["phase"], s["detail"])
                                                           for r, s in _status(root, env).items()}))
    assert final["single-78"]["exit_code"] == 78, final["single-78"]
    STATUS_REPORT.append(_table(root, env))


def test_a_re_created_jobset_is_measured_from_the_run_s_first_start(status_plane, tmp_path):
    """A run now waiting trained for 54 of the last 72 hours before its JobSet was replaced
    (deleted and created again, as an edit's replacement does): wall time, goodput and chip-hours
    count from the record's first start, and a note says why."""
    kube, objects, root, env, gcs = status_plane
    ns = objects.runs_namespace
    run = next(r for r, s in sorted(_status(root, env).items()) if s["phase"].startswith("waiting for "))
    manifest = next(step.manifest for step in objects.steps if step.manifest and step.manifest["kind"] == "JobSet"
                    and step.manifest["metadata"]["name"] == run)
    record = _record(gcs, objects.config.data_bucket, run, tmp_path, time.time() - 72 * 3600, 54 * 3600.0)
    kube.delete("jobset.x-k8s.io/v1alpha2", "JobSet", run, ns, propagation="Foreground")
    wait_for(f"JobSet {run} gone", lambda: kube.find("jobset.x-k8s.io/v1alpha2", "JobSet", run, ns) is None, TIMEOUT)
    apply_one(kube, manifest)
    again = wait_for(f"{run} re-created", lambda: (lambda s: s if s["submitted_at"] and parse_time(s["submitted_at"])
                                                    > parse_time(record["started_at"]) + 71 * 3600 else None)(
        _status(root, env)[run]), TIMEOUT, explain=lambda: str(_status(root, env)[run]))
    assert parse_time(again["measured_from"]) == parse_time(record["started_at"]), again
    assert again["wall_seconds"] >= 72 * 3600 and 0.74 < again["goodput"] < 0.751, again
    assert 8 * 72 <= again["chip_hours"] < 8 * 72.1, again  # 8 chips since the first start, not since the new JobSet
    assert any(n.startswith("the JobSet was re-created at ") for n in again["notes"]), again
    STATUS_REPORT.append(_table(root, env, "--run", run))


# --- the run commands, continuing the scenario above ----------------------------------------------


def _phases(root: Path, env: dict[str, str]) -> dict[str, str]:
    return {run: s["phase"] for run, s in _status(root, env).items()}


def test_the_failed_run_is_explained_in_the_trainers_words_and_inspected(status_plane, tmp_path):
    kube, objects, root, env, _ = status_plane
    ns = objects.runs_namespace
    [problem] = jax_flags.argument_problems(["--batch_size=0"])
    [pod] = [p["metadata"]["name"] for p in pods_of(kube, ns, "single-78")]
    serve(kube, ns, pod, tmp_path, ["I1204 loading the token shards", f"HF_TOKEN={SECRET} is set",
                                    f"configuration error: {problem}"])

    logs = run_tool("logs", STACK, root, env, "--run", "single-78")
    assert logs.returncode == 0 and logs.stdout.splitlines()[-1] == f"configuration error: {problem}", logs

    failed = run_tool("wait", STACK, root, env, "--run", "single-78")
    assert failed.returncode == 3, failed
    assert "exit code 78: a configuration problem a restart can't fix" in failed.stdout
    assert f"  the trainer said configuration error: {problem}" in failed.stdout.splitlines()
    assert run_tool("wait", STACK, root, env, "--run", "single-ok").returncode == 0
    queued = next(run for run, phase in _phases(root, env).items() if phase == "waiting for quota")
    late = run_tool("wait", STACK, root, env, "--run", queued, "--timeout", "3", "--poll", "1")
    assert late.returncode == 75 and f"not admitted within 3 s: {queued}" in late.stdout, late

    done = run_tool("inspect", STACK, root, env, "--run", "single-78", "--out", str(tmp_path / "inspect"))
    assert done.returncode == 0, done
    [folder] = (tmp_path / "inspect").iterdir()
    files = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert {"README.txt", "jobset.yaml", "jobs.yaml", "pods.yaml", "events.yaml", "nodes.yaml", "declared.yaml",
            "progress.txt", f"logs/{pod}.trainer.log"} <= files, files
    assert f"configuration error: {problem}" in (folder / f"logs/{pod}.trainer.log").read_text()
    assert all(SECRET not in (folder / f).read_text() for f in files)
    assert "run single-78: failed" in (folder / "README.txt").read_text()
    jobset = yaml.safe_load((folder / "jobset.yaml").read_text())
    assert any(c["type"] == "Failed" and c["status"] == "True" for c in jobset["status"]["conditions"])
    assert yaml.safe_load((folder / "nodes.yaml").read_text())[0]["conditions"]


def test_logs_follow_a_multi_host_run_across_a_restart_to_its_end(status_plane, tmp_path):
    kube, objects, root, env, _ = status_plane
    ns = objects.runs_namespace
    run = sorted(r for r, phase in _phases(root, env).items() if phase == "running" and r.startswith("ladder"))[0]
    first = [process_pod(kube, ns, run, i, HOSTS) for i in range(HOSTS)]
    files = [serve(kube, ns, pod, tmp_path, [f"process {i} step 1"]) for i, pod in enumerate(first)]
    both = run_tool("logs", STACK, root, env, "--run", run, "--pod", "all")
    assert both.stdout.splitlines() == ["[0] process 0 step 1", "[1] process 1 step 1"], both

    follower = Background("logs", STACK, root, env, "--run", run, "--follow")
    waiter = Background("wait", STACK, root, env, "--run", run, "--poll", "1")
    follower.wait_line("process 0 step 1")
    write_lines(files[0], ["process 0 step 2"])
    follower.wait_line("process 0 step 2")
    kube.delete("v1", "Pod", first[0], ns)  # a restart: every pod of the run is replaced
    second = [process_pod(kube, ns, run, i, HOSTS, not_named=first[i]) for i in range(HOSTS)]
    serve(kube, ns, second[0], tmp_path, ["resumed from step 2", "process 0 step 3"])
    follower.wait_line(f"--- pod {second[0]} (attempt ")
    follower.wait_line("process 0 step 3")
    for pod in second:
        kube.patch("v1", "Pod", pod, ns, {"metadata": {"labels": {COMPLETE_LABEL: "true"}}})
    assert follower.finish() == 0 and follower.lines[-1] == f"--- run {run} succeeded", follower.lines
    assert waiter.finish() == 0 and waiter.lines[-1].endswith(f"{run}: succeeded"), waiter.lines


def test_logs_of_a_run_whose_pods_are_gone_give_the_cloud_logging_query(status_plane):
    kube, objects, root, env, _ = status_plane
    ns = objects.runs_namespace
    delete_and_wait(kube, {"metadata": {"name": "single-ok", "namespace": ns}})
    gone = run_tool("logs", STACK, root, env, "--run", "single-ok")
    assert gone.returncode == 0, gone
    assert "run single-ok has no pods in the cluster" in gone.stdout
    query = unquote(gone.stdout.split(";query=", 1)[1].split(";", 1)[0])
    assert 'labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"="single-ok"' in query
    assert f'resource.labels.namespace_name="{ns}"' in query
