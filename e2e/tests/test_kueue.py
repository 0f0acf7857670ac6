"""What Kueue 0.19.2 really does with the stacks' ladders and priorities, on the scenario control plane.

Kueue tries a workload's flavors in the ClusterQueue's order and pursues the
one it assigned until the workload is admitted: a queued rung whose
ProvisioningRequest fails is retried on that rung (the
ProvisioningRequestConfig's retryStrategy; after its retries Kueue
deactivates the workload), never on another rung
(pkg/controller/admissionchecks/provisioning/controller.go in v0.19.2); the
stacks put a queued pool last in a ladder for that reason.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time

import pytest

from core.names import RUNS_NAMESPACE
from e2e.harness.kube import wait_for
from e2e.harness.observe import KUEUE, admissions
from e2e.harness.tools import ROOT
from e2e.tests.scenario import delete_and_wait, variant
from manifests.kueue import (
    QUEUE_LABEL, cluster_queue, cluster_queue_name, local_queue, priority_class_name, resource_flavor,
)
from stack import reader

LADDER_RUN = "gemma3-ladder"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
PR_API = "autoscaling.x-k8s.io/v1"
TIMEOUT = 120.0
# The first retry of a failed ProvisioningRequest waits about the ProvisioningRequestConfig's
# retryStrategy.backoffBaseSeconds (60 s by default; kueue v0.19.2 pkg/workload/admissionchecks.go
# UpdateAdmissionCheckRequeueState). The retry test sets it to this while it runs: which rung the
# retry is on doesn't depend on how long the workload waits before it is requeued.
RETRY_BACKOFF_SECONDS = 1
RETRY_WINDOW = 60.0


def _admission(kube, ns: str, run: str):
    return next((a for a in admissions(kube, ns) if a.owner == run), None)


def _requests(kube, ns: str, workload: str) -> list[dict]:
    return [pr for pr in kube.list(PR_API, "ProvisioningRequest", ns) if pr["metadata"]["name"].startswith(workload)]


def _ladder(queued) -> tuple[list[str], str]:
    """The ClusterQueue's flavors in order, and the queued one (the flavor its provisioning check is on)."""
    _, kube, _ = queued
    queue = kube.get(KUEUE, "ClusterQueue", cluster_queue_name(RUNS_NAMESPACE))
    flavors = [f["name"] for group in queue["spec"]["resourceGroups"] for f in group["flavors"]]
    checked = [f for c in queue["spec"]["admissionChecksStrategy"]["admissionChecks"] for f in c["onFlavors"]]
    return flavors, checked[0]


@contextlib.contextmanager
def _retry_backoff(kube, seconds: int):
    """The ClusterQueue's ProvisioningRequestConfigs retry after `seconds` while the block runs, then as before."""
    queue = kube.get(KUEUE, "ClusterQueue", cluster_queue_name(RUNS_NAMESPACE))
    configs = [kube.get(KUEUE, "AdmissionCheck", c["name"])["spec"]["parameters"]["name"]
               for c in queue["spec"]["admissionChecksStrategy"]["admissionChecks"]]
    saved = {name: kube.get(KUEUE, "ProvisioningRequestConfig", name)["spec"].get("retryStrategy") for name in configs}
    for name in configs:
        kube.patch(KUEUE, "ProvisioningRequestConfig", name, None,
                   {"spec": {"retryStrategy": {"backoffBaseSeconds": seconds}}})
    try:
        yield
    finally:
        for name, strategy in saved.items():
            kube.patch(KUEUE, "ProvisioningRequestConfig", name, None, {"spec": {"retryStrategy": strategy}})


def _fill(kube, runs, submitted, ns: str, count: int, priority: str = "low") -> list[str]:
    """`count` variants of the ladder run, each admitted before the next is submitted: they take the
    ladder's first `count` rungs."""
    names = [f"{priority}-{i}" for i in range(count)]
    for name in names:
        submitted(variant(runs[LADDER_RUN], name, lambda j: j["metadata"].setdefault("labels", {}).update(
            {PRIORITY_LABEL: priority_class_name(ns, priority)})))
        wait_for(f"{name} admitted", lambda n=name: getattr(_admission(kube, ns, n), "admitted", False),
                 TIMEOUT, explain=lambda: str(admissions(kube, ns)))
    return names


def test_the_ladder_falls_to_the_next_rung_when_the_one_before_is_full(queued, submitted):
    """docs/capacity.md: Kueue tries the rungs in order and takes the next one when the quota of
    the one before is used up; the queued rung, last, is reached once every other is full."""
    _, kube, runs = queued
    flavors, rung = _ladder(queued)
    assert flavors[-1] == rung, f"the queued rung {rung} must be last: {flavors}"
    ns = runs[LADDER_RUN]["metadata"]["namespace"]
    names = _fill(kube, runs, submitted, ns, len(flavors))
    taken = [set(_admission(kube, ns, n).flavors.values()) for n in names]
    assert taken == [{f} for f in flavors], list(zip(names, taken))


def test_a_failed_provisioning_request_is_retried_on_its_rung_never_on_another(queued, submitted):
    cp, kube, runs = queued
    flavors, rung = _ladder(queued)
    ns = runs[LADDER_RUN]["metadata"]["namespace"]
    _fill(kube, runs, submitted, ns, flavors.index(rung))  # the rungs before the queued one are taken
    (cp.state / "provisioner-mode").write_text("hold")  # nothing provisions: the test fails the request
    try:
        with _retry_backoff(kube, RETRY_BACKOFF_SECONDS):
            submitted(variant(runs[LADDER_RUN], "pr-fails"))
            workload = wait_for("the run's Workload", lambda: _admission(kube, ns, "pr-fails"), TIMEOUT).workload
            request = wait_for("its ProvisioningRequest", lambda: _requests(kube, ns, workload), TIMEOUT)[0]
            name = request["metadata"]["name"]
            kube.patch_status(PR_API, "ProvisioningRequest", name, ns, {"conditions": [{
                "type": "Failed", "status": "True", "reason": "ProvisioningFailed", "message": "no capacity (e2e)",
                "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}]})
            seen_flavors: set[str] = set()
            deadline = time.monotonic() + RETRY_WINDOW
            retried = False
            while time.monotonic() < deadline and not retried:
                admission = _admission(kube, ns, "pr-fails")
                seen_flavors |= set(admission.flavors.values())
                retried = any(pr["metadata"]["name"] != name for pr in _requests(kube, ns, workload))
                time.sleep(0.5)
            assert retried, f"no second ProvisioningRequest in {RETRY_WINDOW:.0f}s: {_admission(kube, ns, 'pr-fails')}"
            # The second request exists once the workload holds quota again: on the same rung.
            seen_flavors |= set(_admission(kube, ns, "pr-fails").flavors.values())
            assert seen_flavors == {rung}, f"moved from {rung} to {seen_flavors - {rung}} (flavors {flavors})"
    finally:
        (cp.state / "provisioner-mode").write_text("provision")


def test_a_higher_priority_run_preempts_a_lower_one_when_no_rung_has_room(queued, submitted):
    _, kube, runs = queued
    flavors, _ = _ladder(queued)
    ns = runs[LADDER_RUN]["metadata"]["namespace"]

    low = _fill(kube, runs, submitted, ns, len(flavors))  # a low-priority run on every rung
    submitted(variant(runs[LADDER_RUN], "high",
                      lambda j: j["metadata"].setdefault("labels", {}).update(
                          {PRIORITY_LABEL: priority_class_name(ns, "high")})))

    def preempted():
        states = {a.owner: a for a in admissions(kube, ns)}
        victims = [n for n in low if n in states and "Preempted" in states[n].conditions.get("Evicted", "")]
        return victims if victims and states.get("high") and states["high"].admitted else None

    victims = wait_for("the high-priority run admitted by preempting a low one", preempted, TIMEOUT,
                       explain=lambda: str(admissions(kube, ns)))
    assert len(victims) == 1, victims


# --- two teams' queues on one pool ----------------------------------------------------------------------
# Two teams' ClusterQueues on a pool smaller than two runs, as the stacks declare them, judged by the real Kueue
# 0.19.2 on the scenario control plane.
#
# The pool is the scenario's Spot v6e 2x4 slice (two VMs, eight chips: one run).
# Team A's stack holds it (`quota: {chips: 8}`); team B's holds none of it
# (`quota: {chips: 0}`: it borrows A's idle part) and has an on-demand slice of
# its own as its ladder's next rung. Both queues name the pool's one flavor (named
# from its nodes) and are in one cohort (manifests/kueue.py). Shown here:
#
# - the ladder falls through while the quota is held: with A's run on the pool,
#   B's run is admitted on its next rung, not on the pool;
# - both runs are admitted in turn within the pool: B's second run waits while
#   A's run holds the pool and is admitted on it, borrowing, once A's run is gone;
# - a lender takes its part back: A's next run preempts B's borrowing run
#   (`reclaimWithinCohort: Any`), whose pods go (a trainer checkpoints on SIGTERM).
#
# The teams' LocalQueues are in the scenario's namespace (the one its Kueue
# manages); the scenario's own ClusterQueue holds the same nodes, so it is
# stopped (`stopPolicy: Hold`) for the test and started again after.


def _team_objects() -> tuple[list[dict], str, str]:
    """The teams' queues as their stacks declare them: (objects, the shared flavor, B's next rung's flavor)."""
    contracts = reader.load_files("tpu-queued", ROOT).contracts()
    spot, on_demand = contracts["spot-v6e-2x4"], contracts["v6e-2x4"]
    pool_a = dataclasses.replace(spot, share_chips=8)
    pool_b = dataclasses.replace(spot, share_chips=0)
    assert pool_a.flavor == pool_b.flavor, "both teams name the pool's one flavor"
    objects = [resource_flavor(pool_a)]
    for team, flavors in (("team-a", [pool_a]), ("team-b", [pool_b, on_demand])):
        queue = cluster_queue(flavors, RUNS_NAMESPACE)
        queue["metadata"]["name"] = team  # both teams' LocalQueues live in the namespace the scenario's Kueue manages
        lq = local_queue(RUNS_NAMESPACE)
        lq["metadata"]["name"], lq["spec"]["clusterQueue"] = team, team
        objects += [queue, lq]
    return objects, pool_a.flavor, on_demand.flavor


@pytest.fixture
def teams(queued):
    _, kube, _ = queued
    scenario_queue = cluster_queue_name(RUNS_NAMESPACE)
    objects, shared, next_rung = _team_objects()
    kube.patch(KUEUE, "ClusterQueue", scenario_queue, None, {"spec": {"stopPolicy": "Hold"}})
    try:
        for obj in objects:
            kube.apply(obj)
        yield shared, next_rung
    finally:
        for obj in reversed(objects):
            if obj["kind"] != "ResourceFlavor":
                kube.delete(obj["apiVersion"], obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace"))
        kube.patch(KUEUE, "ClusterQueue", scenario_queue, None, {"spec": {"stopPolicy": "None"}})


def _state(kube, run: str):
    return next((a for a in admissions(kube, RUNS_NAMESPACE) if a.owner == run), None)


def _admitted_on(kube, run: str) -> set[str] | None:
    state = _state(kube, run)
    return set(state.flavors.values()) if state and state.admitted else None


def _pending(kube, run: str) -> bool:
    """Kueue has tried the run and found no flavor with room (QuotaReserved False)."""
    state = _state(kube, run)
    return bool(state) and state.conditions.get("QuotaReserved", "").startswith("False")


def _preempted(kube, run: str) -> bool:
    state = _state(kube, run)
    if state is None:  # its Workload not made yet, or gone
        return False
    conditions = state.conditions
    return conditions.get("Preempted", "").startswith("True") or "Preempted" in conditions.get("Evicted", "")


# `teams` before `submitted`: the runs go (their pods with them) before the queues that admitted them.
def test_two_teams_share_a_pool_smaller_than_two_runs_through_one_cohort(queued, teams, submitted):
    _, kube, runs = queued
    shared, next_rung = teams

    def submit(name: str, team: str) -> dict:
        return submitted(variant(runs[LADDER_RUN], name,
                                 lambda j: j["metadata"]["labels"].update({QUEUE_LABEL: team})))

    def admitted(run: str) -> set[str]:
        return wait_for(f"{run} admitted", lambda: _admitted_on(kube, run), TIMEOUT,
                        explain=lambda: str(admissions(kube, RUNS_NAMESPACE)))

    first_a = submit("team-a-1", "team-a")
    assert admitted("team-a-1") == {shared}
    submit("team-b-1", "team-b")
    assert admitted("team-b-1") == {next_rung}, "B's ladder falls through while A holds the pool's quota"
    submit("team-b-2", "team-b")  # the pool held by A, B's next rung by B's first run: it waits
    wait_for("team-b-2 tried and pending", lambda: _pending(kube, "team-b-2"), TIMEOUT,
             explain=lambda: str(admissions(kube, RUNS_NAMESPACE)))
    assert _admitted_on(kube, "team-b-2") is None
    delete_and_wait(kube, first_a)
    assert admitted("team-b-2") == {shared}, "B's run is admitted in turn on the pool, borrowing A's idle part"
    submit("team-a-2", "team-a")
    assert admitted("team-a-2") == {shared}, "A takes its part back"
    assert _preempted(kube, "team-b-2"), _state(kube, "team-b-2")
