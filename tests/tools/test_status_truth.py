"""`make status` tells the truth: one interval for wall time, goodput and money (a re-created JobSet
included), never a capped ratio, no ETA while a run does not progress (since when, and why), the
reserved capacity's price, the rung from Kueue's flavor names, the stack's own cluster context and
namespace (not the current context), and its exit codes through make."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from stack.reader import load_files
from tests.support.status_objects import (NOW, ROOT, TPU_QUEUED_CONTEXT, ApiServer, at, cond, jobset, pod, record,
                                          request, served_pod, workload)
from tools.status import table
from tools.status.__main__ import EX_CONFIG, EX_NOINPUT
from tools.status.context import stack_context
from tools.status.row import run_facts, status_row


@pytest.fixture(scope="module")
def queued():
    return run_facts(load_files("tpu-queued", ROOT))


def on_node(p: dict, started_ago: float, trainer_started_ago: float | None = None) -> dict:
    """The pod bound to a node since `started_ago`; its trainer container (re)started `trainer_started_ago`."""
    p["spec"] = {"nodeName": "node-0"}
    p["status"]["startTime"] = at(started_ago)
    if trainer_started_ago is not None:
        p["status"]["containerStatuses"] = [{"name": "trainer", "ready": True,
                                             "state": {"running": {"startedAt": at(trainer_started_ago)}}}]
    return p


# --- one interval -----------------------------------------------------------------------------


def test_a_re_created_jobset_is_measured_and_billed_from_the_run_s_first_start(queued):
    """An edit replaced the JobSet an hour ago; the record (kept in the bucket) goes back three days,
    54 h of them training. Wall time, goodput and money all count from the first start."""
    single = queued["gemma3-single-host"]  # 1 chip, on demand (2.70 $/chip-hour)
    rec = record(step=300, total=400, train_seconds=54 * 3600.0, started=72 * 3600, updated=60)
    r = status_row(single, jobset("gemma3-single-host", submitted=3600), None, [],
                   [on_node(pod("gemma3-single-host", 0, True), 3000)], rec, NOW)
    assert r.phase == "running" and r.wall_seconds == 72 * 3600 and r.goodput == 0.75  # 54 h of 72, not 100% of 1 h
    assert r.chip_hours == 72.0 and (r.usd_low, r.usd_high) == (194.40, 194.40)
    assert r.submitted_at == at(3600) and r.measured_from == at(72 * 3600)
    assert any(n.startswith(f"the JobSet was re-created at {at(3600)}") for n in r.notes), r.notes
    details = "\n".join(table.render_details(r))
    assert f"wall time        72h00m since {at(72 * 3600)} (JobSet submitted {at(3600)})" in details
    assert "note             the JobSet was re-created" in details


def test_a_goodput_above_100_percent_is_shown_as_it_is_with_why(queued):
    """A record with more training time than the wall time holds (clocks that disagree): shown, not capped."""
    single = queued["gemma3-single-host"]
    r = status_row(single, jobset("gemma3-single-host", submitted=3600), None, [],
                   [on_node(pod("gemma3-single-host", 0, True), 3000)],
                   record(train_seconds=7200.0, started=3000, updated=60), NOW)
    assert r.goodput == 2.0
    assert r.notes and r.notes[0].startswith("goodput 200% is above 100%: the record's training time (7200 s) "
                                             "exceeds the wall time (3600 s)")
    assert table.render_table([r])[1].split()[10] == "200%!"


# --- no ETA while not progressing ----------------------------------------------------------------


def test_a_restarting_run_has_no_eta_and_says_since_when_and_why(queued):
    wl = workload("gemma3-ladder", [cond("QuotaReserved"), cond("Admitted")], flavor="spot-v6e-2x4")
    js = jobset("gemma3-ladder", [cond("RestartingJobSet", True, "FailurePolicy_Disruption", ago=600)], restarts=1)
    r = status_row(queued["gemma3-ladder"], js, wl, [], [], record(updated=1800), NOW)
    assert r.phase == "restarting" and r.eta_seconds is None and r.progressing is False
    assert r.stalled_since == at(1800)  # the record's last write: the last sign of training
    assert r.stalled_why == f"restarting since {at(600)}: FailurePolicy_Disruption"
    assert table.render_table([r])[1].split()[8] == "stalled"
    assert (f"ETA              none: not progressing since {at(1800)} (its last record, at step 100); restarting "
            f"since {at(600)}: FailurePolicy_Disruption") in "\n".join(table.render_details(r))


def test_a_run_back_to_waiting_for_capacity_says_since_its_last_step_and_the_provisioning_state(queued):
    """Evicted from its Spot rung, the run waits on its queued rung's ProvisioningRequest; its record
    was last written two hours ago."""
    check = "finetune-queued-v6e-2x4-provisioning-3c2d5e"
    wl = workload("gemma3-ladder", [cond("QuotaReserved"), cond("Admitted", False, "UnsatisfiedAdmissionChecks", ago=900)],
                  flavor="queued-v6e-2x4", checks=[{"name": check, "state": "Pending", "message": ""}])
    prs = [request(wl["metadata"]["name"], check, 1, [cond("Accepted", True, "Accepted", "queued for 2 VMs")])]
    r = status_row(queued["gemma3-ladder"], jobset("gemma3-ladder", suspend=True), wl, prs, [],
                   record(updated=7200), NOW)
    assert r.phase == "waiting for capacity" and r.progressing is False and r.eta_seconds is None
    assert r.stalled_since == at(7200)
    assert r.stalled_why.startswith(f"waiting for capacity since {at(900)}: admission check {check}: Pending")
    assert "Accepted (queued for 2 VMs)" in r.stalled_why


def test_a_running_run_whose_trainer_restarted_after_its_last_record_is_not_progressing(queued):
    """Every pod is ready again, but the trainer started 5 minutes ago and has not written since
    (its first trained step writes): restoring or compiling, no ETA."""
    single = queued["gemma3-single-host"]
    p = on_node(pod("gemma3-single-host", 0, True), 3000, trainer_started_ago=300)
    r = status_row(single, jobset("gemma3-single-host"), None, [], [p], record(updated=1200), NOW)
    assert r.phase == "running" and r.eta_seconds is None and r.progressing is False
    assert r.stalled_since == at(1200)
    assert r.stalled_why.startswith(f"its trainer restarted at {at(300)} and has trained no step since")
    # Once it writes again, it progresses and has an ETA: 300 steps at 10 s/step, less the 60 s since.
    r = status_row(single, jobset("gemma3-single-host"), None, [], [p], record(updated=60), NOW)
    assert r.progressing is True and r.eta_seconds == 2940.0 and r.stalled_why == ""


# --- the rung, by Kueue's flavor names -----------------------------------------------------------


def test_the_rung_is_the_pool_of_the_flavor_kueue_names_after_the_namespace(queued):
    """ResourceFlavors are cluster-scoped and named `<namespace>-<pool>` (SchedulingContract.flavor)."""
    ladder = queued["gemma3-ladder"]
    assert ladder.flavors == ("finetune-spot-v6e-2x4-e74a62", "finetune-v6e-2x4-60293a", "finetune-queued-v6e-2x4-1e7dde")
    wl = workload("gemma3-ladder", [cond("QuotaReserved"), cond("Admitted")], flavor="v6e-2x4")
    assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"]["google.com/tpu"] == "finetune-v6e-2x4-60293a"
    r = status_row(ladder, jobset("gemma3-ladder"), wl, [], [], None, NOW)
    assert (r.rung.index, r.rung.pool, r.rung.capacity) == (2, "v6e-2x4", "on-demand")


# --- the stack's own cluster context -------------------------------------------------------------


def _existing_by_name(tmp_path: Path) -> Path:
    """A copy of the existing-dev stack that names its cluster by name and location."""
    config = yaml.safe_load((ROOT / "Pulumi.existing-dev.yaml").read_text())
    config["config"]["gke-finetune:existingCluster"] = {"name": "team-cluster", "location": "us-central1",
                                                        "dnsEndpoint": True, "controllers": "existing"}
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    (tmp_path / "Pulumi.existing-dev.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return tmp_path


def test_the_context_is_the_stack_s_own(tmp_path):
    own = stack_context(load_files("tpu-queued", ROOT))
    assert (own.context, own.kubeconfig) == (TPU_QUEUED_CONTEXT, "")
    assert own.fix == ("run `gcloud container clusters get-credentials finetune-tpu-queued --location us-east5 "
                       "--project my-project-id --dns-endpoint`")
    by_context = stack_context(load_files("existing-dev", ROOT))
    assert by_context.context == "gke_my-project-id_us-east5_team-cluster"
    assert by_context.why == "the stack's existingCluster.context"
    by_name = stack_context(load_files("existing-dev", _existing_by_name(tmp_path)))
    assert by_name.context == "gke_my-project-id_us-central1_team-cluster"
    assert by_name.fix.endswith("get-credentials team-cluster --location us-central1 --project my-project-id "
                                "--dns-endpoint`")
    assert stack_context(load_files("tpu-queued", ROOT), "mine").context == "mine"


def _show(env: dict, *args: str, root: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools.status", "show", "--root", str(root), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env=env)


def test_status_reads_the_stack_s_context_and_namespace_not_the_current_context(tmp_path):
    """The current context is another cluster (a closed port): status reads the stack's own, in the
    stack's namespace, and says which it read."""
    team = "gke_my-project-id_us-east5_team-cluster"
    ns = "/api/v1/namespaces/ml-team"
    api = ApiServer({ns: {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "ml-team"}},
                      "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ml-team/jobsets": {
                          "items": [jobset("gemma3-single-host", ready=1)]},
                      f"{ns}/pods": {"kind": "PodList", "apiVersion": "v1", "metadata": {},
                                     "items": [served_pod("gemma3-single-host")]}})
    env = api.kubeconfig(tmp_path / "kubeconfig", context=team, current="someone-elses-cluster")
    res = _show(env, "--stack", "existing-dev", "--progress-dir", str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0] == (f"stack existing-dev: read context {team} (the stack's "
                                          "existingCluster.context), namespace ml-team")
    assert "gemma3-single-host     running" in res.stdout
    res = _show(env, "--stack", "existing-dev", "--progress-dir", str(tmp_path), "--json")
    assert res.returncode == 0 and json.loads(res.stdout)[0]["phase"] == "running"
    assert f"read context {team}" in res.stderr  # beside --json's output, not in it


def test_a_missing_stack_context_exits_78_with_the_command_that_writes_it(tmp_path):
    api = ApiServer({})
    env = api.kubeconfig(tmp_path / "kubeconfig", context="someone-elses-cluster")
    res = _show(env, "--stack", "tpu-queued")
    assert res.returncode == EX_CONFIG == 78, res.stderr
    assert (f"has no context {TPU_QUEUED_CONTEXT} (the stack's own cluster, as `gcloud container clusters "
            "get-credentials` names it); run `gcloud container clusters get-credentials finetune-tpu-queued "
            "--location us-east5 --project my-project-id --dns-endpoint`") in res.stderr
    env["KUBECONFIG"] = str(tmp_path / "none")  # no kubeconfig at all: the same
    assert _show(env, "--stack", "tpu-queued").returncode == 78
    # --context names another one explicitly.
    env = api.kubeconfig(tmp_path / "kubeconfig", context="mine")
    res = _show(env, "--stack", "tpu-queued", "--context", "mine")
    assert res.returncode == EX_NOINPUT and "namespace 'finetune' does not exist" in res.stderr


# --- exit codes through make ---------------------------------------------------------------------


def test_make_status_says_the_tool_s_exit_code_and_the_command_that_keeps_it(tmp_path):
    """GNU make exits 0, 1 or 2 whatever a recipe exits with (the manual's "Running make"): make
    status prints the tool's code and what it means; the command it prints exits with that code."""
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "none")}
    done = subprocess.run(["make", "-s", "-o", ".venv/.installed", "status", "STACK=tpu-queued"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2, done.stderr
    [line] = [x for x in done.stderr.splitlines() if x.startswith("make status: ")]
    assert line.startswith("make status: exit code 78 (a stack file or kubeconfig to fix); make itself exits 2: "
                           "for the code, run ")
    command = line.split("for the code, run ", 1)[1]
    direct = subprocess.run(command, shell=True, cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert direct.returncode == 78, direct.stderr


def test_kubeconfig_is_read_as_it_is_when_status_runs_not_when_the_client_was_imported(tmp_path, monkeypatch):
    """The Kubernetes client fixes its default kubeconfig (KUBECONFIG or ~/.kube/config) when it is
    imported; status, run in a process whose KUBECONFIG changed since (a long-lived one, the e2e's), reads
    the file KUBECONFIG names now."""
    import kubernetes.config  # noqa: F401  (imported before KUBECONFIG names the file)

    from tools.status.context import check
    from tools.status.sources import KubeCluster

    api = ApiServer({})
    env = api.kubeconfig(tmp_path / "kubeconfig", current="someone-elses-cluster")
    monkeypatch.setenv("KUBECONFIG", env["KUBECONFIG"])
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.kube/config to fall back on
    check("tpu-queued", stack_context(load_files("tpu-queued", ROOT)))  # raises if the context isn't read
    assert KubeCluster(context=TPU_QUEUED_CONTEXT).client.Configuration.get_default_copy().host == api.url
