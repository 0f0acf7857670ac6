"""Does the pod fit its node? Its requests, sidecars included, against the node's allocatable.

A pod's effective request is what the scheduler sums: every app container
and native sidecar (an init container with `restartPolicy: Always`), or
the largest plain init container with the sidecars started before it,
whichever is more.
https://kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/#resource-sharing-within-containers
GKE injects the Cloud Storage FUSE sidecar as a native sidecar into pods
annotated `gke-gcsfuse/volumes: "true"`, with the requests the
`gke-gcsfuse/*-request` annotations give (the driver's defaults otherwise).
https://cloud.google.com/kubernetes-engine/docs/how-to/cloud-storage-fuse-csi-driver-sidecar#configure-sidecar-resources
Memory-backed emptyDirs (/dev/shm, an in-memory cache) take node memory
charged to the container that writes them (a tmpfs page belongs to the
memory cgroup that first touched it:
https://docs.kernel.org/admin-guide/cgroup-v2.html#memory-ownership). When
every container of the pod, the FUSE sidecar included, has a memory limit,
that is within the limits, which the requests equal here; otherwise they
take memory no request reserves and are counted at their `sizeLimit`. One
without a `sizeLimit` is a finding (it may grow to the node's memory).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from admission.findings import Finding
from core import quantity
from core.allocatable import MEMORY_MODEL_MARGIN, Allocatable

SOURCE = "https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes"
RESOURCES = ("cpu", "memory", "ephemeral-storage")
# gcs-fuse-csi-driver's defaults for a sidecar without request annotations (pkg/webhook/config.go).
FUSE_DEFAULT_REQUESTS = {"cpu": "250m", "memory": "256Mi", "ephemeral-storage": "5Gi"}
FUSE_ANNOTATION = "gke-gcsfuse/volumes"


@dataclass(frozen=True)
class FitLine:
    resource: str
    requested: float  # cores or bytes
    allocatable: float
    margin: float = 0.0  # what must stay free of the modelled allocatable (memory: the model's error)

    @property
    def fits(self) -> bool:
        return self.requested + self.margin <= self.allocatable

    def shown(self, value: float) -> str:
        return quantity.show_cpu(value) if self.resource == "cpu" else quantity.show_bytes(value)

    def __str__(self) -> str:
        return f"{self.resource}: {self.shown(self.requested)} requested of {self.shown(self.allocatable)} allocatable"


def _requests(container: Mapping, field: str = "requests") -> dict[str, float]:
    asked = (container.get("resources") or {}).get(field) or {}
    return {r: float(quantity.parse(asked[r])) for r in RESOURCES if r in asked}


def _add(total: dict[str, float], more: Mapping[str, float]) -> None:
    for resource, value in more.items():
        total[resource] = total.get(resource, 0.0) + value


def fuse_sidecar_requests(annotations: Mapping[str, str]) -> dict[str, float]:
    if annotations.get(FUSE_ANNOTATION) != "true":
        return {}
    return {
        r: float(quantity.parse(annotations.get(f"gke-gcsfuse/{r}-request", FUSE_DEFAULT_REQUESTS[r])))
        for r in RESOURCES
    }


def fuse_sidecar_limits(annotations: Mapping[str, str]) -> dict[str, float]:
    """The injected sidecar's limits (the driver's rule: a limit unset is its request; 0 is none, left out)."""
    if annotations.get(FUSE_ANNOTATION) != "true":
        return {}
    requests = fuse_sidecar_requests(annotations)
    limits = {r: float(quantity.parse(annotations[f"gke-gcsfuse/{r}-limit"])) if f"gke-gcsfuse/{r}-limit" in
              annotations else (requests[r] if f"gke-gcsfuse/{r}-request" in annotations else 0.0) for r in RESOURCES}
    return {r: v for r, v in limits.items() if v}


def _memory_bounded(pod: Mapping) -> bool:
    """Every container of the pod (the injected FUSE sidecar included) has a memory limit."""
    spec = pod.get("spec") or {}
    containers = [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    sidecar = annotations.get(FUSE_ANNOTATION) != "true" or "memory" in fuse_sidecar_limits(annotations)
    return sidecar and all("memory" in ((c.get("resources") or {}).get("limits") or {}) for c in containers)


def memory_volume_bytes(spec: Mapping) -> float:
    return sum(
        float(quantity.parse(v["emptyDir"].get("sizeLimit", "0")))
        for v in spec.get("volumes") or []
        if (v.get("emptyDir") or {}).get("medium") == "Memory"
    )


def effective(pod: Mapping, field: str = "requests") -> dict[str, float]:
    """The pod's effective `field` (requests or limits: cores, bytes) as the scheduler and the quota count them,
    the injected FUSE sidecar included: its containers and native sidecars together, or its largest plain
    init container with the sidecars started before it, whichever is more (component-helpers
    resource.PodRequests / PodLimits)."""
    spec, annotations = pod.get("spec") or {}, (pod.get("metadata") or {}).get("annotations") or {}
    running: dict[str, float] = {}
    for container in spec.get("containers") or []:
        _add(running, _requests(container, field))
    sidecars = dict(fuse_sidecar_requests(annotations) if field == "requests" else fuse_sidecar_limits(annotations))
    peak_init: dict[str, float] = {}
    for init in spec.get("initContainers") or []:
        if init.get("restartPolicy") == "Always":
            _add(sidecars, _requests(init, field))
        else:
            for resource, value in _requests(init, field).items():
                peak_init[resource] = max(peak_init.get(resource, 0.0), value + sidecars.get(resource, 0.0))
    _add(running, sidecars)
    return {r: max(running.get(r, 0.0), peak_init.get(r, 0.0)) for r in RESOURCES}


def pod_requests(pod: Mapping) -> dict[str, float]:
    """The pod's effective requests (cores, bytes), the injected FUSE sidecar included, and its memory volumes
    where no memory limit holds them (module docstring)."""
    requests = effective(pod)
    if not _memory_bounded(pod):
        requests["memory"] += memory_volume_bytes(pod.get("spec") or {})
    return requests


def fit_lines(pod: Mapping, node: Allocatable) -> list[FitLine]:
    """Each resource's request against the node; memory keeps the capacity model's margin free
    (core/allocatable.py: the kubelet's capacity is modelled, within 0.6% of real nodes)."""
    asked = pod_requests(pod)
    margins = {"memory": MEMORY_MODEL_MARGIN * node.memory}
    return [FitLine(r, asked[r], node.get(r), margins.get(r, 0.0)) for r in RESOURCES]


def fit_findings(pod: Mapping, node: Allocatable, where: str) -> list[Finding]:
    return [
        Finding("fit", f"{where}.{line.resource}", line.shown(line.requested),
                f"requested, more than the node's {line.shown(line.allocatable)} allocatable"
                + (f" less the {line.shown(line.margin)} margin" if line.margin else ""), SOURCE)
        for line in fit_lines(pod, node)
        if not line.fits
    ] + [
        Finding("fit", f"{where}.volumes[{i}].emptyDir.sizeLimit", None,
                "is unset on a memory-backed volume, which may then fill the node's memory", SOURCE)
        for i, v in enumerate((pod.get("spec") or {}).get("volumes") or [])
        if (v.get("emptyDir") or {}).get("medium") == "Memory" and "sizeLimit" not in v["emptyDir"]
    ]
