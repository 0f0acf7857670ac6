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
import time

from core.names import RUNS_NAMESPACE
from e2e.harness.kube import wait_for
from e2e.harness.observe import KUEUE, admissions
from e2e.tests.scenario import variant
from manifests.kueue import cluster_queue_name, priority_class_name

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
