"""controllers/ladder.py: what it does to a JobSet and its Workloads at each point of an eviction.

The real API server, JobSet webhook and Kueue take its requests in e2e/tests/test_kueue_eviction.py; here each
decision is checked on its own, with the JobSets and Workloads as the API server returns them, and applied to
them as the API server would (RFC 6902 `test` and `add`, a merge patch, a delete).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest

from controllers import ladder
from controllers.ladder import ADMITTED, JOBSETS, LADDER, MOVING, WORKLOADS, Ladder, next_step
from tests.conftest import ROOT

LABEL = "gke-finetune/pool"
RUNGS = ["spot", "on-demand", "queued"]
UID = "5d6f-jobset"


def _jobset(suspend: bool, selector: str | None = None, admitted: str | None = None, replicated: int = 2) -> dict:
    annotations = {LADDER: json.dumps({"label": LABEL, "rungs": RUNGS})}
    if admitted:
        annotations[ADMITTED] = admitted
    node_selector = {"cloud.google.com/gke-tpu-topology": "2x4", **({LABEL: selector} if selector else {})}
    pod = {"spec": {"template": {"spec": {"nodeSelector": dict(node_selector)}}}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "run", "uid": UID, "annotations": annotations},
        "spec": {"suspend": suspend,
                 "replicatedJobs": [{"name": f"slice-{i}", "template": copy.deepcopy(pod)} for i in range(replicated)]},
    }


def _workload(reason: str | None = "PodsReadyTimeout", owner: str = UID, status: str = "True",
              name: str = "jobset-run-1") -> dict:
    conditions = [{"type": "Evicted", "status": status, "reason": reason}] if reason else []
    return {"metadata": {"name": name, "ownerReferences": [{"kind": "JobSet", "uid": owner}]},
            "spec": {"active": True}, "status": {"conditions": conditions}}


class Cluster:
    """One JobSet and its Workloads, changed by the controller's actions as the API server would."""

    def __init__(self, jobset: dict, workloads: list[dict]):
        self.jobset, self.workloads, self.calls = jobset, {w["metadata"]["name"]: w for w in workloads}, []

    def step(self) -> ladder.Step | None:
        step = next_step(self.jobset, list(self.workloads.values()))
        for action in step.actions if step else ():
            self.apply(action)
        return step

    def apply(self, action: ladder.Action) -> None:
        kind, _, name = action.path.rpartition("/")
        self.calls.append((action.method, kind))
        if action.method == "DELETE":
            del self.workloads[name]
        elif kind == WORKLOADS:
            _merge(self.workloads[name], action.body)
        else:
            self.jobset = _json_patch(self.jobset, action.body)


def _merge(target: dict, patch: dict) -> None:
    for key, value in patch.items():
        if isinstance(value, dict):
            _merge(target.setdefault(key, {}), value)
        else:
            target[key] = value


def _json_patch(obj: dict, ops: list[dict]) -> dict:
    out = copy.deepcopy(obj)
    for op in ops:
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        node = out
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if op["op"] == "test":
            if node[last] != op["value"]:
                raise AssertionError(f"422: test failed at {op['path']}")
        else:
            node[last] = op["value"]
    return out


def _selectors(jobset: dict) -> set[str | None]:
    return {rj["template"]["spec"]["template"]["spec"].get("nodeSelector", {}).get(LABEL)
            for rj in jobset["spec"]["replicatedJobs"]}


def test_an_admitted_run_has_its_rung_recorded_once():
    cluster = Cluster(_jobset(suspend=False, selector="on-demand"), [])
    assert cluster.step().moved is None
    assert cluster.jobset["metadata"]["annotations"][ADMITTED] == "on-demand"
    assert cluster.step() is None


def test_an_evicted_run_moves_to_the_rung_after_the_one_it_was_admitted_on():
    cluster = Cluster(_jobset(suspend=True, admitted="spot"), [_workload()])
    step = cluster.step()
    assert step.moved == ("spot", "on-demand")
    # The Workload marked and deactivated first, the JobSet pinned while suspended, the Workload deleted.
    assert cluster.calls == [("PATCH", WORKLOADS), ("PATCH", JOBSETS), ("DELETE", WORKLOADS)]
    assert step.actions[0].body == {"metadata": {"annotations": {MOVING: "on-demand"}}, "spec": {"active": False}}
    assert step.actions[1].body[0] == {"op": "test", "path": "/spec/suspend", "value": True}
    assert _selectors(cluster.jobset) == {"on-demand"}  # every slice's pods
    assert cluster.jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["nodeSelector"][
        "cloud.google.com/gke-tpu-topology"] == "2x4"  # the rest of the selector stays
    assert cluster.workloads == {}
    # Kueue makes a new Workload from the pinned JobSet: nothing more to do.
    cluster.workloads["jobset-run-2"] = _workload(reason=None, name="jobset-run-2")
    assert cluster.step() is None


def test_a_move_cut_short_is_finished_by_the_next_pass():
    """The Workload marked, then the pin refused (Kueue admitted the run again meanwhile): the deactivated
    Workload is evicted, the JobSet suspended, and the next pass pins it and deletes the Workload."""
    cluster = Cluster(_jobset(suspend=True, admitted="spot"), [_workload()])
    step = next_step(cluster.jobset, list(cluster.workloads.values()))
    cluster.apply(step.actions[0])  # marked; the rest refused
    cluster.jobset["spec"]["suspend"] = False  # admitted meanwhile: no record while the mark stands
    assert next_step(cluster.jobset, list(cluster.workloads.values())) is None
    cluster.jobset["spec"]["suspend"] = True  # Kueue evicts the deactivated Workload
    again = cluster.step()
    assert again.moved is None and cluster.calls[-2:] == [("PATCH", JOBSETS), ("DELETE", WORKLOADS)]
    assert _selectors(cluster.jobset) == {"on-demand"} and cluster.workloads == {}


def test_a_pinned_run_evicted_again_moves_on_and_stops_at_the_last_rung():
    cluster = Cluster(_jobset(suspend=True, selector="on-demand", admitted="on-demand"), [_workload()])
    assert cluster.step().moved == ("on-demand", "queued") and _selectors(cluster.jobset) == {"queued"}
    last = _jobset(suspend=True, selector="queued", admitted="queued")
    assert next_step(last, [_workload()]) is None  # Kueue's backoff and requeueLimit apply there


def test_a_run_never_seen_admitted_moves_past_its_pin_or_the_first_rung():
    assert next_step(_jobset(suspend=True), [_workload()]).moved == (None, "on-demand")
    assert next_step(_jobset(suspend=True, selector="on-demand"), [_workload()]).moved == ("on-demand", "queued")


@pytest.mark.parametrize("workloads", [
    [],  # not evicted: a suspended run waiting for admission
    [_workload(reason="Preempted")],  # another run took its quota: Kueue's own order stands
    [_workload(status="False")],  # admitted again since
    [_workload(owner="another-jobset")],
], ids=["no-workload", "preempted", "evicted-no-more", "another-jobsets"])
def test_nothing_moves_without_its_own_pods_ready_eviction(workloads):
    assert next_step(_jobset(suspend=True, admitted="spot"), workloads) is None


def test_a_jobset_without_a_ladder_or_being_deleted_is_left_alone():
    plain = _jobset(suspend=True, admitted="spot")
    del plain["metadata"]["annotations"][LADDER]
    assert next_step(plain, [_workload()]) is None
    deleting = _jobset(suspend=True, admitted="spot")
    deleting["metadata"]["deletionTimestamp"] = "2026-12-06T00:00:00Z"
    assert next_step(deleting, [_workload()]) is None


def test_a_pod_template_without_a_selector_gets_one():
    bare = _jobset(suspend=True, admitted="spot", replicated=1)
    del bare["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["nodeSelector"]
    cluster = Cluster(bare, [_workload()])
    cluster.step()
    assert _selectors(cluster.jobset) == {"on-demand"}


def test_the_ladder_reads_its_annotation():
    assert Ladder.of(_jobset(suspend=True)) == Ladder(LABEL, tuple(RUNGS))
    assert Ladder(LABEL, ("a", "b")).after("b") is None and Ladder(LABEL, ("a", "b")).after("x") == "b"


def test_the_event_names_both_rungs_and_the_jobset():
    event = ladder.event(_jobset(suspend=True), ("spot", "on-demand"), "team-a")
    assert event["involvedObject"] == {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "run",
                                       "namespace": "team-a", "uid": UID}
    assert "spot" in event["message"] and "on-demand" in event["message"] and event["reason"] == "NextRung"


def test_without_an_api_server_it_exits_78_and_it_needs_no_package_beyond_the_standard_library(tmp_path):
    """Run as its pod runs it (one file, a bare Python: `-S` leaves out every installed package)."""
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    done = subprocess.run([sys.executable, "-S", str(ROOT / "controllers" / "ladder.py")], capture_output=True,
                          text=True, env={**env, "SERVICE_ACCOUNT_DIR": str(tmp_path)}, timeout=60)
    assert done.returncode == 78, done
    assert "no API server" in done.stdout


def test_the_probes_read_the_times_of_the_last_pass(tmp_path):
    assert ladder.probe(tmp_path, "ready", 2) == 1  # no pass yet
    ladder._touch(tmp_path / "ready")
    assert ladder.probe(tmp_path, "ready", 2) == 0
    old = ladder.time.time() - ladder.PROBE_MIN_SECONDS - 1
    os.utime(tmp_path / "ready", (old, old))
    assert ladder.probe(tmp_path, "ready", 2) == 1  # the loop stalled
    assert ladder.probe(tmp_path, "ready", 10) == 0  # ten polls of 10 s is longer


def test_a_probe_is_the_file_run_with_its_flag(tmp_path):
    (tmp_path / "alive").write_text("0")
    run = [sys.executable, "-S", str(ROOT / "controllers" / "ladder.py")]
    env = {**os.environ, "LADDER_STATE_DIR": str(tmp_path)}
    assert subprocess.run([*run, "--probe", "alive"], env=env, timeout=60).returncode == 0
    assert subprocess.run([*run, "--probe", "ready"], env=env, timeout=60).returncode == 1
    assert subprocess.run([*run, "--probe", "other"], env=env, timeout=60, capture_output=True).returncode == 78
