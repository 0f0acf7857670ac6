"""Which pod of a run is which process, and how its trainer container ended. Pure: pods as plain dicts.

A run's JobSet has one replicated job of `slices` Indexed Jobs with one pod per host
(manifests/run.py); JobSet labels each pod with its Job's index, `jobset.sigs.k8s.io/job-index`
(the slice), and the Job controller with its completion index, `batch.kubernetes.io/job-completion-index`
(the host within the slice): the process index the trainers use is slice x hosts per slice + host
(JAX's process id, the rank of the GPU trainer's `accelerate`). A restart of the JobSet (its failure
policy) creates new Jobs and pods, labelled `jobset.sigs.k8s.io/restart-attempt` with the attempt.
(kubernetes-sigs/jobset v0.12.0 api/jobset/v1alpha2/jobset_types.go JobIndexKey, RestartsKey;
https://kubernetes.io/docs/reference/labels-annotations-taints/#batch-kubernetes-io-job-completion-index)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tools.status.phase import CONTAINER

JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"


def _labels(pod: Mapping) -> Mapping[str, str]:
    return (pod.get("metadata") or {}).get("labels") or {}


def name(pod: Mapping) -> str:
    return (pod.get("metadata") or {}).get("name", "")


def created(pod: Mapping) -> str:
    return (pod.get("metadata") or {}).get("creationTimestamp") or ""


def process_index(pod: Mapping, hosts_per_slice: int) -> int:
    """The pod's process index across the run's slices; -1 where its labels don't say."""
    labels = _labels(pod)
    try:
        return int(labels[JOB_INDEX_LABEL]) * hosts_per_slice + int(labels[COMPLETION_INDEX_LABEL])
    except (KeyError, ValueError):
        return -1


def attempt(pod: Mapping) -> int:
    try:
        return int(_labels(pod).get(RESTART_ATTEMPT_LABEL, "0"))
    except ValueError:
        return 0


def newest_by_index(pods: Sequence[Mapping], hosts_per_slice: int) -> dict[int, Mapping]:
    """The newest pod of each process index (a restart's pods replace the earlier attempt's)."""
    out: dict[int, Mapping] = {}
    for pod in sorted(pods, key=lambda p: (attempt(p), created(p), name(p))):
        out[process_index(pod, hosts_per_slice)] = pod
    return dict(sorted(out.items()))


def trainer_status(pod: Mapping) -> Mapping:
    for cs in (pod.get("status") or {}).get("containerStatuses") or ():
        if cs.get("name") == CONTAINER:
            return cs
    return {}


def terminated(pod: Mapping) -> Mapping | None:
    """The trainer container's `terminated` state (exitCode, reason, signal, finishedAt), or None."""
    cs = trainer_status(pod)
    return (cs.get("state") or {}).get("terminated") or (cs.get("lastState") or {}).get("terminated")


def ended(pod: Mapping) -> bool:
    """Whether the pod will write no more log: its trainer ended, the pod is terminal or being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    return (phase in ("Succeeded", "Failed") or terminated(pod) is not None
            or bool((pod.get("metadata") or {}).get("deletionTimestamp")))


def started(pod: Mapping) -> bool:
    """Whether the trainer container has started (it has a log to read)."""
    state = trainer_status(pod).get("state") or {}
    return "running" in state or "terminated" in state


def failed_pods(pods: Sequence[Mapping]) -> list[Mapping]:
    """The pods whose trainer exited non-zero, the latest end first."""
    found = [(t.get("finishedAt") or "", p) for p in pods for t in [terminated(p)] if t and t.get("exitCode")]
    return [p for _, p in sorted(found, key=lambda pair: pair[0], reverse=True)]
