"""Variants of a shipped run, submitted to a running control plane, and cleaned up after."""

from __future__ import annotations

import copy
from collections.abc import Callable

from e2e.harness.kube import Kube, wait_for
from e2e.harness.observe import wait_bound, wait_unschedulable

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
GONE_TIMEOUT = 60.0
# At most this long for the scheduler's verdict on a pod it can't place (it comes in about a second).
VERDICT_TIMEOUT = 60.0
# Then this long with no pod bound: the scheduler tries a refused pod again only on a cluster event
# that could make it fit, or after 5 minutes in its unschedulable queue (k8s.io/kubernetes v1.35.4
# pkg/scheduler/backend/queue/scheduling_queue.go, DefaultPodMaxInUnschedulablePodsDuration).
STILL_UNBOUND_SECONDS = 2.0


def variant(jobset: dict, name: str, change: Callable[[dict], None] | None = None) -> dict:
    """A copy of a run's JobSet under another name (its pods' subdomain too), changed by `change`."""
    out = copy.deepcopy(jobset)
    out["metadata"]["name"] = name
    if "network" in out["spec"] and out["spec"]["network"].get("subdomain"):
        out["spec"]["network"]["subdomain"] = name
    if change:
        change(out)
    return out


def pod_template(jobset: dict, index: int = 0) -> dict:
    return jobset["spec"]["replicatedJobs"][index]["template"]["spec"]["template"]


def pod_spec(jobset: dict, index: int = 0) -> dict:
    return pod_template(jobset, index)["spec"]


def delete_and_wait(kube: Kube, jobset: dict) -> None:
    """Delete a JobSet and wait until none of its pods is left (their nodes are free again)."""
    name, ns = jobset["metadata"]["name"], jobset["metadata"]["namespace"]
    kube.delete(JOBSET_API, "JobSet", name, ns, propagation="Foreground")
    wait_for(f"JobSet {ns}/{name} and its pods gone",
             lambda: not kube.list("v1", "Pod", ns, labels=f"jobset.sigs.k8s.io/jobset-name={name}")
             and kube.find(JOBSET_API, "JobSet", name, ns) is None, GONE_TIMEOUT)


def jobset_condition(kube: Kube, jobset: dict, kind: str) -> dict | None:
    stored = kube.get(JOBSET_API, "JobSet", jobset["metadata"]["name"], jobset["metadata"]["namespace"])
    return next((c for c in stored.get("status", {}).get("conditions") or []
                 if c["type"] == kind and c["status"] == "True"), None)


def jobset_status(kube: Kube, jobset: dict) -> dict:
    return kube.get(JOBSET_API, "JobSet", jobset["metadata"]["name"], jobset["metadata"]["namespace"]).get("status", {})


def refused_by_scheduler(kube: Kube, jobset: dict) -> str:
    """What `wait_bound` (the stack tests' wait) fails with for a JobSet the scheduler can't place: once
    the scheduler has refused every pod and said why (observe.wait_unschedulable), not after a fixed wait."""
    wait_unschedulable(kube, jobset, VERDICT_TIMEOUT)
    try:
        placed = wait_bound(kube, jobset, STILL_UNBOUND_SECONDS)
    except TimeoutError as err:
        return str(err)
    raise AssertionError(f"JobSet {jobset['metadata']['name']} was placed after the scheduler refused it: {placed}")
