"""What Kueue 0.19.2 really does with the stacks' ladders and priorities, on the scenario control plane.

Kueue tries a workload's flavors in the ClusterQueue's order and pursues the
one it assigned until the workload is admitted: a queued rung whose
ProvisioningRequest fails is retried on that rung (the
ProvisioningRequestConfig's retryStrategy; after its retries Kueue
deactivates the workload), never on the next rung
(pkg/controller/admissionchecks/provisioning/controller.go in v0.19.2).
"""

from __future__ import annotations

import time

from e2e.harness.kube import wait_for
from e2e.harness.observe import KUEUE, admissions
from e2e.tests.scenario import variant

LADDER_RUN = "gemma3-ladder"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
PR_API = "autoscaling.x-k8s.io/v1"
TIMEOUT = 120.0
# Kueue's default retry backoff is 60 s (ProvisioningRequestConfig retryStrategy.backoffBaseSeconds).
RETRY_WINDOW = 150.0


def _admission(kube, ns: str, run: str):
    return next((a for a in admissions(kube, ns) if a.owner == run), None)


def _requests(kube, ns: str, workload: str) -> list[dict]:
    return [pr for pr in kube.list(PR_API, "ProvisioningRequest", ns) if pr["metadata"]["name"].startswith(workload)]


def _ladder(queued) -> tuple[list[str], str]:
    """The ladder run's rungs in the ClusterQueue's flavor order, and the first (queued) one."""
    _, kube, _ = queued
    queue = kube.get(KUEUE, "ClusterQueue", "finetune")
    flavors = [f["name"] for group in queue["spec"]["resourceGroups"] for f in group["flavors"]]
    return flavors, flavors[0]


def test_a_failed_provisioning_request_is_retried_on_its_rung_and_never_falls_to_the_next(queued, submitted):
    cp, kube, runs = queued
    flavors, first = _ladder(queued)
    (cp.state / "provisioner-mode").write_text("hold")  # nothing provisions: the test fails the request
    try:
        run = submitted(variant(runs[LADDER_RUN], "pr-fails"))
        ns = run["metadata"]["namespace"]
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
            time.sleep(1)
        assert retried, f"no second ProvisioningRequest within {RETRY_WINDOW:.0f}s: {_admission(kube, ns, 'pr-fails')}"
        assert seen_flavors <= {first}, f"fell from {first} to {seen_flavors - {first}} (flavors {flavors})"
    finally:
        (cp.state / "provisioner-mode").write_text("provision")


def test_a_higher_priority_run_preempts_a_lower_one_when_no_rung_has_room(queued, submitted):
    _, kube, runs = queued
    flavors, _ = _ladder(queued)
    ns = runs[LADDER_RUN]["metadata"]["namespace"]

    def with_priority(name: str, priority: str) -> dict:
        return variant(runs[LADDER_RUN], name,
                       lambda j: j["metadata"].setdefault("labels", {}).update({PRIORITY_LABEL: priority}))

    low = [f"low-{i}" for i in range(len(flavors))]
    for name in low:  # one low-priority run on every rung
        submitted(with_priority(name, "low"))
        wait_for(f"{name} admitted", lambda n=name: getattr(_admission(kube, ns, n), "admitted", False),
                 TIMEOUT, explain=lambda: str(admissions(kube, ns)))
    submitted(with_priority("high", "high"))

    def preempted():
        states = {a.owner: a for a in admissions(kube, ns)}
        victims = [n for n in low if "Preempted" in states[n].conditions.get("Evicted", "")]
        return victims if victims and states.get("high") and states["high"].admitted else None

    victims = wait_for("the high-priority run admitted by preempting a low one", preempted, TIMEOUT,
                       explain=lambda: str(admissions(kube, ns)))
    assert len(victims) == 1, victims
