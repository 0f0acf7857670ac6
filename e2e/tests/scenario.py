"""Variants of a shipped run, submitted to a running control plane, and cleaned up after."""

from __future__ import annotations

import copy
from collections.abc import Callable

from e2e.harness.kube import Kube, wait_for

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
GONE_TIMEOUT = 60.0


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
