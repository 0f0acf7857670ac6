"""controllers/ladder.py: what it does to a JobSet, given its Workloads, at each point of an eviction.

The real API server, JobSet webhook and Kueue take its patches in e2e/tests/test_kueue_eviction.py; here each
decision is checked on its own, with the JobSets and Workloads as the API server returns them.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest

from controllers import ladder
from controllers.ladder import ADMITTED, LADDER, Ladder, next_step
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


def _workload(reason: str | None = "PodsReadyTimeout", owner: str = UID, status: str = "True") -> dict:
    conditions = [{"type": "Evicted", "status": status, "reason": reason}] if reason else []
    return {"metadata": {"name": "jobset-run-1", "ownerReferences": [{"kind": "JobSet", "uid": owner}]},
            "status": {"conditions": conditions}}


def _apply(jobset: dict, ops: list[dict]) -> dict:
    """RFC 6902 `test` and `add` as the API server applies them (the only two the controller sends)."""
    out = copy.deepcopy(jobset)
    for op in ops:
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        node = out
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if op["op"] == "test":
            assert node[last] == op["value"], f"test failed at {op['path']}"
        else:
            node[last] = op["value"]
    return out


def _selectors(jobset: dict) -> set[str | None]:
    return {rj["template"]["spec"]["template"]["spec"].get("nodeSelector", {}).get(LABEL)
            for rj in jobset["spec"]["replicatedJobs"]}


def test_an_admitted_run_has_its_rung_recorded_once():
    running = _jobset(suspend=False, selector="on-demand")
    step = next_step(running, [])
    recorded = _apply(running, step.ops)
    assert recorded["metadata"]["annotations"][ADMITTED] == "on-demand" and step.moved is None
    assert next_step(recorded, []) is None


def test_an_evicted_run_is_pinned_to_the_rung_after_the_one_it_was_admitted_on():
    evicted = _jobset(suspend=True, admitted="spot")
    step = next_step(evicted, [_workload()])
    assert step.moved == ("spot", "on-demand")
    assert step.ops[0] == {"op": "test", "path": "/spec/suspend", "value": True}
    pinned = _apply(evicted, step.ops)
    assert _selectors(pinned) == {"on-demand"}  # every slice's pods
    assert pinned["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["nodeSelector"][
        "cloud.google.com/gke-tpu-topology"] == "2x4"  # the rest of the selector stays
    # Until Kueue makes the new Workload, the evicted one is still there: nothing more is done.
    assert next_step(pinned, [_workload()]) is None


def test_a_pinned_run_evicted_again_moves_on_and_stops_at_the_last_rung():
    on_demand = _apply(_jobset(suspend=True, selector="on-demand", admitted="on-demand"), [])
    step = next_step(on_demand, [_workload()])
    assert step.moved == ("on-demand", "queued") and _selectors(_apply(on_demand, step.ops)) == {"queued"}
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
    assert _selectors(_apply(bare, next_step(bare, [_workload()]).ops)) == {"on-demand"}


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
    done = subprocess.run([sys.executable, "-S", str(ROOT / "controllers" / "ladder.py")], capture_output=True, text=True,
                          env={**env, "SERVICE_ACCOUNT_DIR": str(tmp_path)}, timeout=60)
    assert done.returncode == 78, done
    assert "no API server" in done.stdout
