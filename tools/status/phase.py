"""A run's phase from its JobSet, Workload, ProvisioningRequests and pods (tools/status/model.py says
what each condition means and where that is written)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tools.status.model import PR_CONDITIONS, condition, is_true

CONTAINER = "trainer"  # core.trainers.CONTAINER, the trainer container of every run's pods


def admitted_flavor(workload: Mapping | None) -> str | None:
    """The ResourceFlavor Kueue reserved quota on (a pool's SchedulingContract.flavor), or None."""
    admission = ((workload or {}).get("status") or {}).get("admission") or {}
    for assignment in admission.get("podSetAssignments") or ():
        for flavor in (assignment.get("flavors") or {}).values():
            return flavor
    return None


def provisioning_state(workload: Mapping, requests: Sequence[Mapping]) -> str:
    """The provisioning admission check and its newest ProvisioningRequest, in words."""
    parts = []
    for check in ((workload.get("status") or {}).get("admissionChecks")) or ():
        text = f"admission check {check.get('name')}: {check.get('state', 'Pending')}"
        parts.append(text + (f" ({check['message']})" if check.get("message") else ""))
    if requests:
        newest = max(requests, key=lambda r: (r.get("metadata") or {}).get("creationTimestamp", ""))
        name = (newest.get("metadata") or {}).get("name", "?")
        state = next((c for c in PR_CONDITIONS if is_true(newest, c)), "Pending")
        message = (condition(newest, state) or {}).get("message", "")
        parts.append(f"ProvisioningRequest {name}: {state}" + (f" ({message})" if message else ""))
    return "; ".join(parts) or "no admission check state yet"


def failed_exit_code(pods: Sequence[Mapping]) -> int | None:
    """The trainer container's non-zero exit code in the pods, the newest first."""
    found = []
    for pod in pods:
        for cs in (pod.get("status") or {}).get("containerStatuses") or ():
            if cs.get("name") != CONTAINER:
                continue
            for state in ((cs.get("state") or {}).get("terminated"), (cs.get("lastState") or {}).get("terminated")):
                if state and state.get("exitCode"):
                    found.append((state.get("finishedAt") or "", int(state["exitCode"])))
    return max(found)[1] if found else None


def pods_ready(pods: Sequence[Mapping]) -> int:
    return sum(1 for p in pods if is_true(p, "Ready"))


def unschedulable(pods: Sequence[Mapping]) -> str:
    for pod in pods:
        c = condition(pod, "PodScheduled")
        if c and c.get("status") == "False" and c.get("reason") == "Unschedulable":
            return c.get("message", "unschedulable")
    return ""


def phase(jobset: Mapping, workload: Mapping | None, requests: Sequence[Mapping], pods: Sequence[Mapping],
          expected_pods: int) -> tuple[str, str]:
    """(phase, detail) of one run."""
    if is_true(jobset, "Completed"):
        return "succeeded", ""
    if is_true(jobset, "Failed"):
        c = condition(jobset, "Failed") or {}
        return "failed", f"{c.get('reason', '')}: {c.get('message', '')}".strip(": ")
    if workload is not None:
        queued = _queued_phase(workload, requests)
        if queued is not None:
            return queued
    elif (jobset.get("spec") or {}).get("suspend"):
        return "suspended", "spec.suspend is true"
    if is_true(jobset, "RestartingJobSet"):
        c = condition(jobset, "RestartingJobSet") or {}
        return "restarting", c.get("reason", "")
    ready = pods_ready(pods)
    if expected_pods and ready >= expected_pods:
        return "running", ""
    waiting = unschedulable(pods)
    if waiting and workload is None:
        return "waiting for capacity", f"pods unschedulable: {waiting}"
    return ("admitted" if workload is not None else "starting"), f"{ready}/{expected_pods} pods ready"


def _queued_phase(workload: Mapping, requests: Sequence[Mapping]) -> tuple[str, str] | None:
    """The phase Kueue decides, or None once the Workload is admitted (the pods decide then)."""
    if (workload.get("spec") or {}).get("active") is False:
        evicted = condition(workload, "Evicted") or {}
        return "failed", f"Kueue deactivated the run: {evicted.get('message') or evicted.get('reason', '')}".strip(": ")
    if is_true(workload, "Finished"):
        c = condition(workload, "Finished") or {}
        return ("succeeded" if c.get("reason") == "Succeeded" else "failed"), c.get("message", "")
    if not is_true(workload, "QuotaReserved"):
        c = condition(workload, "QuotaReserved") or {}
        evicted = condition(workload, "Evicted")
        why = c.get("message") or c.get("reason") or "pending"
        if evicted and evicted.get("status") == "True":
            why = f"evicted ({evicted.get('reason', '')}: {evicted.get('message', '')}); {why}"
        return "waiting for quota", why
    if not is_true(workload, "Admitted"):
        return "waiting for capacity", provisioning_state(workload, requests)
    return None
