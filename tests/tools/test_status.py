"""`make status`: phases, pods, restarts, progress, ETA, goodput and money from the objects the
controllers write (JobSet v0.12.0, Kueue v0.19.2 Workload, ProvisioningRequest, pods) and the
trainers' progress record; the CLI's messages and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from stack.reader import load_files
from tools.status.__main__ import EX_CONFIG, EX_NOINPUT, EX_UNAVAILABLE
from tools.status.model import ProgressError, validate_progress
from tools.status.row import run_facts, status_row
from manifests.run import build_runs, platform_facts
from stack.images import offline_images
from tools.status.sources import BucketProgress, LocalProgress, checkpoint_mount
from trainers import progress

from tests.support.status_objects import (NOW, ROOT, TPU_QUEUED_CONTEXT, ApiServer, at, cond, jobset,
                                          kubeconfig_with, pod, record, request, served_pod, workload)

@pytest.fixture(scope="module")
def queued():
    return run_facts(load_files("tpu-queued", ROOT))


def row(facts, name, js, wl=None, requests=(), pods=(), rec=None):
    return status_row(facts[name], js, wl, list(requests), list(pods), rec, NOW)


# --- phases -----------------------------------------------------------------------------------


def test_a_run_kueue_has_not_reserved_quota_for_is_waiting_for_quota(queued):
    wl = workload("gemma3-ladder", [cond("QuotaReserved", False, "WaitingForQuota",
                                         "couldn't assign flavors to pod set trainer: insufficient quota")])
    r = row(queued, "gemma3-ladder", jobset("gemma3-ladder", suspend=True), wl)
    assert r.phase == "waiting for quota" and "insufficient quota" in r.detail
    assert r.rung is None and r.usd_high == 0.0 and r.chip_hours == 0.0  # no trainer started: nothing billed
    # Never started: not progressing since its submission, and why.
    assert r.progressing is False and r.stalled_since == at(3 * 3600) and r.eta_seconds is None
    assert r.stalled_why.startswith(f"waiting for quota since {at(0)}: couldn't assign flavors")


def test_a_run_on_its_queued_rung_waits_for_capacity_with_the_provisioning_request_s_state(queued):
    check = "queued-v6e-2x4-provisioning"
    wl = workload("gemma3-ladder", [cond("QuotaReserved"), cond("Admitted", False, "UnsatisfiedAdmissionChecks")],
                  flavor="queued-v6e-2x4", checks=[{"name": check, "state": "Pending", "message": ""}])
    name = wl["metadata"]["name"]
    prs = [request(name, check, 1, [cond("Failed", True, "NotProvisioned", "out of capacity")]),
           request(name, check, 2, [cond("Accepted", True, "Accepted", "queued for 2 VMs")])]
    r = row(queued, "gemma3-ladder", jobset("gemma3-ladder", suspend=True), wl, prs)
    assert r.phase == "waiting for capacity"
    assert f"admission check {check}: Pending" in r.detail
    assert f"ProvisioningRequest {name}-{check}-2: Accepted (queued for 2 VMs)" in r.detail  # the newest
    assert (r.rung.index, r.rung.of, r.rung.pool, r.rung.capacity) == (3, 3, "queued-v6e-2x4", "queued")


def test_an_admitted_run_shows_its_rung_then_runs_when_every_pod_is_ready(queued):
    wl = workload("gemma3-ladder", [cond("QuotaReserved"), cond("Admitted")], flavor="v6e-2x4")
    js = jobset("gemma3-ladder", ready=0)
    r = row(queued, "gemma3-ladder", js, wl, pods=[pod("gemma3-ladder", 0, True), pod("gemma3-ladder", 1, False)])
    assert (r.phase, r.detail, r.pods_ready, r.pods) == ("admitted", "1/2 pods ready", 1, 2)
    assert (r.rung.index, r.rung.pool, r.rung.capacity) == (2, "v6e-2x4", "on-demand")
    r = row(queued, "gemma3-ladder", jobset("gemma3-ladder", ready=1), wl,
            pods=[pod("gemma3-ladder", 0, True), pod("gemma3-ladder", 1, True)])
    assert (r.phase, r.slices_ready, r.slices) == ("running", 1, 1)


def test_restarting_succeeded_and_failed_with_the_reason_and_exit_code(queued):
    wl = workload("gemma3-ladder", [cond("QuotaReserved"), cond("Admitted")], flavor="spot-v6e-2x4")
    restarting = jobset("gemma3-ladder", [cond("RestartingJobSet", True, "FailurePolicy_Disruption")], restarts=2, counted=1)
    r = row(queued, "gemma3-ladder", restarting, wl)
    assert (r.phase, r.detail, r.restarts, r.restarts_counted, r.max_restarts) == (
        "restarting", "FailurePolicy_Disruption", 2, 1, 3)
    done = jobset("gemma3-ladder", [cond("Completed", True, "AllJobsCompleted", "jobset completed successfully", ago=600)])
    assert row(queued, "gemma3-ladder", done, wl).phase == "succeeded"
    failed = jobset("gemma3-ladder", [cond("Failed", True, "FailJobSetFailurePolicyAction",
                                           "applying FailJobSet failure policy action (first failed job: gemma3-ladder-trainer-0)")])
    r = row(queued, "gemma3-ladder", failed, wl, pods=[pod("gemma3-ladder", 0, False, exit_code=78)])
    assert (r.phase, r.exit_code) == ("failed", 78)
    assert r.reason.startswith("FailJobSetFailurePolicyAction: applying FailJobSet failure policy action")


def test_a_deactivated_workload_is_a_failed_run_and_a_run_outside_kueue_waits_on_its_pods(queued):
    wl = workload("gemma3-ladder", [cond("QuotaReserved", False, "Inadmissible"),
                                    cond("Evicted", True, "Deactivated", "the admission check was rejected")],
                  active=False)
    r = row(queued, "gemma3-ladder", jobset("gemma3-ladder", suspend=True), wl)
    assert (r.phase, r.detail) == ("failed", "Kueue deactivated the run: the admission check was rejected")
    single = row(queued, "gemma3-single-host", jobset("gemma3-single-host"), None,
                 pods=[pod("gemma3-single-host", 0, False, unschedulable="0/3 nodes are available")])
    assert (single.phase, single.rung.pool, single.rung.of) == ("waiting for capacity", "v6e-1x1", 1)
    assert "0/3 nodes are available" in single.detail


def test_outside_kueue_the_nodes_tell_the_rung(queued):
    """Autopilot: the ComputeClass's rungs differ in capacity, which GKE labels its nodes with."""
    facts = run_facts(load_files("autopilot", ROOT))["gemma3-single-host"]
    js, p = jobset("gemma3-single-host"), pod("gemma3-single-host", 0, True) | {"spec": {"nodeName": "n1"}}
    spot = {"metadata": {"name": "n1", "labels": {"cloud.google.com/gke-spot": "true"}}}
    on_demand = {"metadata": {"name": "n1", "labels": {}}}
    assert status_row(facts, js, None, [], [p], None, NOW, [spot]).rung.capacity == "spot"
    r = status_row(facts, js, None, [], [p], record(started=3600), NOW, [on_demand])
    assert (r.rung.index, r.rung.pool, r.rung.capacity) == (2, "v6e-1x1-on-demand", "on-demand")
    assert (r.usd_low, r.usd_high) == (2.70, 2.70)  # 1 chip, 1 hour, on demand
    unknown = status_row(facts, js, None, [], [p], record(started=3600), NOW, [])
    assert unknown.rung is None and (unknown.usd_low, unknown.usd_high) == (0.24, 2.70)  # the ladder's range
    # Standard: the pool label the platform puts on every node of a pool.
    pooled = {"metadata": {"name": "n1", "labels": {"gke-finetune/pool": "v6e-2x4"}}}
    ladder = queued["gemma3-ladder"]
    assert status_row(ladder, jobset("gemma3-ladder"), None, [], [p], None, NOW, [pooled]).rung.index == 2


# --- progress, ETA, goodput and money ---------------------------------------------------------


def test_eta_goodput_and_money_on_the_spot_rung_by_hand(queued):
    wl = workload("gemma3-ladder", [cond("QuotaReserved"), cond("Admitted")], flavor="spot-v6e-2x4")
    pods = [pod("gemma3-ladder", 0, True), pod("gemma3-ladder", 1, True)]
    r = row(queued, "gemma3-ladder", jobset("gemma3-ladder", ready=1, submitted=3 * 3600), wl, pods=pods,
            rec=record(step=100, total=400, train_seconds=5400.0, started=2 * 3600, updated=60))
    assert r.phase == "running" and (r.step, r.total_steps, r.tokens_per_s, r.loss, r.eval_loss) == (100, 400, 5120.0, 2.5, 2.75)
    # 5400 s for 100 steps: 54 s/step; 300 steps left = 16200 s, less the 60 s since the record was written.
    assert r.eta_seconds == 16140.0
    assert r.wall_seconds == 3 * 3600 and r.goodput == 0.5  # 5400 s training in 3 hours since submission
    # Billed since the trainer first started, 2 hours ago: 8 chips x 2 h = 16 chip-hours. Spot v6e: at most
    # the on-demand 2.70 $/chip-hour (43.20 $), at least 91% off (0.243 x 16 = 3.888 $).
    assert r.chip_hours == 16.0 and (r.usd_low, r.usd_high) == (3.89, 43.20)


def test_money_at_the_on_demand_rung_and_outside_kueue_by_hand(queued):
    wl = workload("gemma3-ladder", [cond("QuotaReserved"), cond("Admitted")], flavor="v6e-2x4")
    r = row(queued, "gemma3-ladder", jobset("gemma3-ladder"), wl, rec=record(started=5400))
    assert r.chip_hours == 12.0 and (r.usd_low, r.usd_high) == (32.40, 32.40)  # 8 chips x 1.5 h x 2.70
    single = row(queued, "gemma3-single-host", jobset("gemma3-single-host"), None,
                 rec=record(started=1800, train_seconds=900.0))
    assert single.chip_hours == 0.5 and (single.usd_low, single.usd_high) == (1.35, 1.35)  # 1 chip x 0.5 h x 2.70


def test_a_running_run_without_a_record_yet_is_billed_from_its_oldest_pod_on_a_node(queued):
    wl = workload("gemma3-ladder", [cond("QuotaReserved"), cond("Admitted")], flavor="v6e-2x4")
    pods = [pod("gemma3-ladder", i, True) for i in range(2)]
    for p, started in zip(pods, (3600, 1800)):
        p["spec"], p["status"]["startTime"] = {"nodeName": f"node-{started}"}, at(started)
    r = row(queued, "gemma3-ladder", jobset("gemma3-ladder"), wl, pods=pods)
    assert r.chip_hours == 8.0 and (r.usd_low, r.usd_high) == (21.60, 21.60)  # 8 chips x 1 h x 2.70
    # A record older than the pods (a restart made new pods): billed from the trainer's first start.
    r = row(queued, "gemma3-ladder", jobset("gemma3-ladder"), wl, pods=pods, rec=record(started=5400))
    assert r.chip_hours == 12.0
    unbound = [pod("gemma3-ladder", 0, False)]
    unbound[0]["status"]["startTime"] = at(3600)  # never on a node: nothing billed
    assert row(queued, "gemma3-ladder", jobset("gemma3-ladder"), wl, pods=unbound).chip_hours == 0.0


def test_a_finished_run_stops_its_clock_and_a_reservation_costs_its_reserved_capacity():
    facts = run_facts(load_files("a4", ROOT))
    done = jobset("gemma4-sql", [cond("Completed", True, "AllJobsCompleted", ago=3600)], submitted=4 * 3600)
    r = status_row(facts["gemma4-sql"], done, None, [], [], record(step=400, total=400, train_seconds=5400.0,
                                                                   started=3 * 3600), NOW)
    assert r.phase == "succeeded" and r.wall_seconds == 3 * 3600  # submitted 4 h ago, finished 1 h ago
    # 8 GPUs x 2 h on a reservation: the reserved A4 VM's price (90.22 $/VM-hour x 2 h), paid whether used or not.
    assert r.chip_hours == 16.0 and (r.usd_low, r.usd_high) == (180.44, 180.44)
    assert "the reserved capacity's price, 90.22 $/VM-hour" in r.price_note and "whether used or not" in r.price_note
    assert r.eta_seconds is None and r.goodput == 0.5 and r.progressing is None


# --- the progress record ----------------------------------------------------------------------


def test_the_reader_accepts_what_the_trainers_write(tmp_path):
    p = progress.Progress(str(tmp_path), "t", 10, started=NOW - 100, clock=lambda: NOW)
    p.resumed(0)
    p.first_step(1, 3.0)
    p.trained(5, 40.0, 2.0, 100.0)
    p.evaluated(5, 2.2)
    p.checkpointed(5)
    rec = validate_progress(json.loads((tmp_path / "progress.json").read_text()))
    assert (rec["step"], rec["checkpoint_step"], rec["eval_loss"], rec["train_seconds"]) == (5, 5, 2.2, 40.0)
    assert rec["restore_seconds"] == 100.0 and rec["starts"] == 1


def test_the_record_names_the_run_the_manifests_name():
    from core.names import RUN_ENV
    from manifests.pod import env

    assert progress.RUN_ENV == RUN_ENV
    config = load_files("tpu-queued", ROOT)
    assert {"name": RUN_ENV, "value": "gemma3-ladder"} in env(config.runs[0], config.runs[0].row)


@pytest.mark.parametrize("change, key", [({"schema": 2}, "schema"), ({"step": "7"}, "step"),
                                         ({"updated_at": "yesterday"}, "updated_at"),
                                         ({"step": 500}, "step"), ({"loss": "low"}, "loss")])
def test_a_bad_record_names_its_key_and_what_is_allowed(change, key):
    with pytest.raises(ProgressError) as err:
        validate_progress(record() | change)
    assert err.value.key == key and "allowed:" in str(err.value)


def test_a_bad_record_in_the_bucket_layout_is_reported_not_fatal(tmp_path):
    run_dir = tmp_path / "checkpoints" / "tpu-queued" / "gemma3-ladder"
    run_dir.mkdir(parents=True)
    (run_dir / "progress.json").write_text("{not json")
    rec, problem = LocalProgress(str(tmp_path), "tpu-queued").read("gemma3-ladder")
    assert rec is None and "not JSON" in problem and str(run_dir / "progress.json") in problem
    assert LocalProgress(str(tmp_path), "tpu-queued").read("other") == (None, "")


def test_the_record_is_read_where_the_deployed_run_mounts_its_checkpoints(tmp_path):
    """A run deployed before the bucket's prefixes carried the stack keeps `checkpoints/<run>/`
    (core/names.py): its JobSet's checkpoints volume says so, and the record is read there."""
    config = load_files("tpu-queued", ROOT)
    legacy = config.with_legacy_runs(["gemma3-ladder"])
    for cfg, where in ((config, "checkpoints/tpu-queued/gemma3-ladder"), (legacy, "checkpoints/gemma3-ladder")):
        deployed = build_runs(cfg.runs, cfg.contracts(), platform_facts(cfg, offline_images(cfg)))["gemma3-ladder"]
        assert checkpoint_mount(deployed) == where
    assert checkpoint_mount(jobset("gemma3-ladder")) is None  # no volumes: the stack's layout
    (tmp_path / "checkpoints" / "gemma3-ladder").mkdir(parents=True)
    (tmp_path / "checkpoints" / "gemma3-ladder" / "progress.json").write_text(json.dumps(record(step=7)))
    progress = LocalProgress(str(tmp_path), "tpu-queued")
    assert progress.read("gemma3-ladder", "checkpoints/gemma3-ladder")[0]["step"] == 7
    assert progress.read("gemma3-ladder") == (None, "")


def test_a_bucket_that_cannot_be_read_is_reported_per_run(monkeypatch):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/key.json")
    rec, problem = BucketProgress("my-bucket", "my-project-id", "tpu-queued").read("gemma3-ladder")
    assert rec is None and problem.startswith("gs://my-bucket cannot be read: ")


# --- the command ------------------------------------------------------------------------------


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools.status", "show", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def _dump(tmp_path, *items) -> str:
    path = tmp_path / "objects.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(items)}))
    return str(path)


def test_the_command_prints_a_line_per_run_then_one_run_s_details(tmp_path):
    wl = workload("gemma3-ladder", [cond("QuotaReserved"), cond("Admitted")], flavor="spot-v6e-2x4")
    dump = _dump(tmp_path, jobset("gemma3-ladder", ready=1), wl, pod("gemma3-ladder", 0, True),
                 pod("gemma3-ladder", 1, True), jobset("gemma3-single-host"))
    (tmp_path / "checkpoints" / "tpu-queued" / "gemma3-ladder").mkdir(parents=True)
    (tmp_path / "checkpoints" / "tpu-queued" / "gemma3-ladder" / "progress.json").write_text(json.dumps(record()))
    # One's own container, admitted on its ladder's first rung, writing the progress record where its
    # environment says (GKE_FINETUNE_PROGRESS: checkpoints/<stack>/<run>/progress.json in the bucket).
    own = workload("own-container", [cond("QuotaReserved"), cond("Admitted")], flavor="v6e-2x4")
    dump = _dump(tmp_path, jobset("gemma3-ladder", ready=1), wl, pod("gemma3-ladder", 0, True),
                 pod("gemma3-ladder", 1, True), jobset("gemma3-single-host"), jobset("own-container", ready=1), own,
                 pod("own-container", 0, True), pod("own-container", 1, True))
    (tmp_path / "checkpoints" / "tpu-queued" / "own-container").mkdir(parents=True)
    (tmp_path / "checkpoints" / "tpu-queued" / "own-container" / "progress.json").write_text(
        json.dumps(record(step=250, total=1000, trainer="team-train")))
    res = _cli("--stack", "tpu-queued", "--from-json", dump, "--progress-dir", str(tmp_path))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == f"stack tpu-queued: objects from {dump}, namespace finetune"
    assert lines[1].split()[:3] == ["run", "phase", "rung"]
    assert lines[2].split()[:3] == ["gemma3-ladder", "running", "1/3"] and "100/400" in lines[2]
    assert lines[3].startswith("gemma3-single-host")
    assert lines[4].split()[:5] == ["own-container", "running", "1/2", "2/2", "0/3"] and "250/1000" in lines[4]
    assert len(lines) == 5  # several runs: no details
    res = _cli("--stack", "tpu-queued", "--from-json", dump, "--progress-dir", str(tmp_path), "--run", "gemma3-ladder")
    assert "run gemma3-ladder: running" in res.stdout
    assert "rung 1 of 3: pool spot-v6e-2x4 (spot)" in res.stdout and "restarts         0 of a budget of 3" in res.stdout
    res = _cli("--stack", "tpu-queued", "--from-json", dump, "--progress-dir", str(tmp_path), "--json")
    [ladder, single, container] = json.loads(res.stdout)
    assert ladder["rung"]["pool"] == "spot-v6e-2x4" and ladder["step"] == 100 and single["step"] is None
    assert container["rung"]["pool"] == "v6e-2x4" and container["step"] == 250 and container["loss"] == 2.5


def test_clear_messages_and_exit_codes(tmp_path):
    res = _cli("--stack", "tpu-queued", "--run", "nope", "--from-json", _dump(tmp_path))
    assert res.returncode == EX_NOINPUT and "'nope' is not a run of stack tpu-queued" in res.stderr
    res = _cli("--stack", "tpu-queued", "--from-json", _dump(tmp_path))
    assert res.returncode == EX_NOINPUT and "has no runs submitted in namespace 'finetune'" in res.stderr
    res = _cli("--stack", "tpu-queued", "--run", "gemma3-ladder", "--from-json", _dump(tmp_path, jobset("gemma3-single-host")),
               "--progress-dir", str(tmp_path))
    assert res.returncode == EX_NOINPUT and "run 'gemma3-ladder' of stack tpu-queued has no JobSet" in res.stderr
    res = _cli("--stack", "tpu-queued", "--from-json", _dump(tmp_path, jobset("gemma3-single-host")),
               "--progress-dir", str(tmp_path), "--watch", "0.01", "--iterations", "2")
    assert res.returncode == 0, res.stderr
    ladder_lines = [line for line in res.stdout.splitlines() if line.startswith("gemma3-ladder ")]
    assert len(ladder_lines) == 2 and "not submitted" in ladder_lines[0]  # shown twice: --watch
    res = _cli("--stack", "no-such-stack")
    assert res.returncode == EX_CONFIG and "stack no-such-stack" in res.stderr


def test_a_cluster_that_does_not_answer_exits_69(tmp_path):
    """The Kubernetes client against a kubeconfig whose stack context's API server is a closed port on 127.0.0.1."""
    with __import__("socket").socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps(kubeconfig_with({TPU_QUEUED_CONTEXT: f"https://127.0.0.1:{port}"})))
    env = {**__import__("os").environ, "KUBECONFIG": str(kubeconfig)}
    res = subprocess.run([sys.executable, "-m", "tools.status", "show", "--stack", "tpu-queued"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == EX_UNAVAILABLE, res.stderr
    assert "the cluster of stack tpu-queued cannot be reached: the API server did not answer" in res.stderr
    kubeconfig.write_text("{not a kubeconfig")
    res = subprocess.run([sys.executable, "-m", "tools.status", "show", "--stack", "tpu-queued"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == EX_UNAVAILABLE and "no usable kubeconfig" in res.stderr, res.stderr


def test_the_kubernetes_client_path_not_deployed_and_served_objects(tmp_path):
    ns, jobsets = "/api/v1/namespaces/finetune", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/finetune/jobsets"
    api = ApiServer({})
    env = api.kubeconfig(tmp_path / "kubeconfig")
    cmd = [sys.executable, "-m", "tools.status", "show", "--stack", "tpu-queued", "--progress-dir", str(tmp_path)]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == EX_NOINPUT, res.stderr
    assert "stack tpu-queued has nothing deployed here: namespace 'finetune' does not exist" in res.stderr
    api.routes[ns] = {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "finetune"}}
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == EX_NOINPUT and "the JobSet API (jobset.x-k8s.io/v1alpha2) is not installed" in res.stderr
    # Kueue's Workloads served, the ProvisioningRequest API absent (404: no such objects).
    wl = workload("gemma3-ladder", [cond("QuotaReserved"), cond("Admitted")], flavor="spot-v6e-2x4")
    api.routes[jobsets] = {"items": [jobset("gemma3-ladder", ready=1)]}
    api.routes["/apis/kueue.x-k8s.io/v1beta2/namespaces/finetune/workloads"] = {"items": [wl]}
    api.routes[f"{ns}/pods"] = {"kind": "PodList", "apiVersion": "v1", "metadata": {},
                                "items": [served_pod("gemma3-ladder")]}
    res = subprocess.run([*cmd, "--run", "gemma3-ladder"], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr
    assert "run gemma3-ladder: admitted (1/2 pods ready)" in res.stdout
    assert "rung 1 of 3: pool spot-v6e-2x4 (spot)" in res.stdout


def test_the_export_and_its_evaluation_are_shown_once_complete(tmp_path):
    """`make status` reads exports/<stack>/<run>/ as the trainers write it (trainers/export_dir.py,
    trainers/eval_report.py): not yet, then complete with its figures beside the base model's."""
    from trainers import eval_report, export_dir

    source = LocalProgress(str(tmp_path), "dev")
    line, evaluated = source.export("exports/a4/gemma4-sql")
    assert "not written yet" in line and evaluated == ""
    directory = tmp_path / "exports" / "a4" / "gemma4-sql"
    directory.mkdir(parents=True)
    (directory / "model.safetensors").write_bytes(b"0" * 2048)
    body = eval_report.record("trl-gpu", 40, 0.5, 1.25, [{"prompt": "p", "model_match": True, "base_match": False},
                                                         {"prompt": "q", "model_match": False, "base_match": False}],
                              eval_report.SQL_EXECUTION)
    eval_report.write(str(directory), body)
    assert "not written yet" in source.export("exports/a4/gemma4-sql")[0]  # no marker: not complete
    export_dir.finish(str(directory), {"trainer": "trl-gpu", "step": 40})
    line, evaluated = source.export("exports/a4/gemma4-sql")
    assert "complete at" in line and "step 40, 2 files" in line and "(make download)" in line
    assert evaluated == ("held-out loss 0.5000 (base 1.2500); sql_execution_accuracy 50.0% (base 0.0%) on 2 records; "
                         "2 samples")
