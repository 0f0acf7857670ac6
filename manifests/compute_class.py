"""An Autopilot run's capacity ladder as a GKE custom ComputeClass (`cloud.google.com/v1`), a plain dict.

One class per Autopilot run with a `ladder:` (stack/queueing.py,
`compute_classes`): `spec.priorities` lists the ladder's rungs in order, and
GKE tries them in that order when it creates the nodes of a pod that selects
the class (`cloud.google.com/compute-class: <name>`). Each rule is a rung's
accelerator, as the shape's node labels name it, and its capacity:

- TPU: `tpu: {type, count, topology}`: the `cloud.google.com/gke-tpu-accelerator`
  value, the chips of one node, the slice topology;
- GPU: `gpu: {type, count, driverVersion}`: the `cloud.google.com/gke-accelerator`
  value, the GPUs of one node, and `latest`, the driver the shape's selector asks
  for (stack/contracts.py);
- on-demand `spot: false`, Spot `spot: true`, flex-start `flexStart: {enabled: true}`,
  a reservation `reservations: {affinity: Specific, specific: [{name, project?}]}`
  (the project of a shared one).

`whenUnsatisfiable: DoNotScaleUp`: when no rung can be had, the pods wait
instead of GKE creating nodes outside the ladder; `nodePoolAutoCreation:
{enabled: true}`: GKE creates the rung's nodes itself, as Autopilot does for
every workload. `activeMigration` is left off (its default, no migration): a
run is not moved to a better rung once it runs.

Sources (field names and values):
https://cloud.google.com/kubernetes-engine/docs/reference/crds/computeclass
(the CRD reference: `priorities[].tpu.{count,topology,type}`,
`priorities[].gpu.{count,driverVersion,type}`, `priorities[].spot`,
`priorities[].reservations.{affinity: Specific, specific[].{name,project}}`,
`nodePoolAutoCreation.enabled`, `whenUnsatisfiable`);
https://cloud.google.com/kubernetes-engine/docs/concepts/about-custom-compute-classes
(fallback priorities, `DoNotScaleUp` / `ScaleUpAnyway`, Autopilot support);
GoogleCloudPlatform/accelerated-platforms,
platforms/gke/base/core/custom_compute_class/templates/manifests/tpu/v6e/custom-compute-tpu-v6e-2x4.yaml
and .../gpu/h200-141gb/custom-compute-gpu-h200-141gb-x8-ultra.yaml
(`flexStart: {enabled: true}` rules beside `spot: true` / `spot: false` ones,
`tpu: {count: 8, topology: 2x4, type: tpu-v6e-slice}`, `gpu.driverVersion: latest`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from core.catalog import Family
from core.contract import SchedulingContract
from manifests.kueue import manifest_key
from stack.contracts import reservation_parts

API_VERSION = "cloud.google.com/v1"
KIND = "ComputeClass"
# Pods wait rather than land on nodes outside the ladder.
WHEN_UNSATISFIABLE = "DoNotScaleUp"
GPU_DRIVER_VERSION = "latest"


def accelerator_rule(contract: SchedulingContract) -> dict:
    """The rung's accelerator: the shape's chips per node, and its topology for a TPU."""
    accelerator = contract.shape.accelerator
    if contract.family is Family.TPU:
        return {"tpu": {"type": accelerator.gke_accelerator, "count": contract.chips_per_host,
                        "topology": contract.shape.topology}}
    return {"gpu": {"type": accelerator.gke_accelerator, "count": contract.chips_per_host,
                    "driverVersion": GPU_DRIVER_VERSION}}


def capacity_rule(contract: SchedulingContract) -> dict:
    """The rung's capacity as a priority rule's fields; ValueError for one no rule expresses."""
    if contract.capacity == "on-demand":
        return {"spot": False}
    if contract.capacity == "spot":
        return {"spot": True}
    if contract.capacity == "flex-start":
        return {"flexStart": {"enabled": True}}
    if contract.capacity == "reservation" and contract.reservation:
        project, name = reservation_parts(contract.reservation)
        specific = {"name": name} if project is None else {"name": name, "project": project}
        return {"reservations": {"affinity": "Specific", "specific": [specific]}}
    raise ValueError(f"shape {contract.pool!r}: capacity {contract.capacity!r} has no ComputeClass priority rule")


def priority_rule(contract: SchedulingContract) -> dict:
    return {**accelerator_rule(contract), **capacity_rule(contract)}


def compute_class(name: str, rungs: Sequence[SchedulingContract]) -> dict:
    """The ComputeClass whose priorities are `rungs`, in order."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name},
        "spec": {
            "priorities": [priority_rule(c) for c in rungs],
            "whenUnsatisfiable": WHEN_UNSATISFIABLE,
            "nodePoolAutoCreation": {"enabled": True},
        },
    }


def compute_class_manifests(classes: Mapping[str, Sequence[SchedulingContract]]) -> dict[str, dict]:
    """Every ComputeClass of a stack (`StackConfig.compute_classes()`), by `<kind>-<name>`."""
    manifests = [compute_class(name, rungs) for name, rungs in classes.items()]
    return {manifest_key(m): m for m in manifests}
