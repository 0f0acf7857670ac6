"""A pod's node, as seen from the declared resources alone (for the policy pack).

On Standard, the pool label of the pod's selector names a declared node
pool, whose machine type, boot disk and local SSD setting give the node's
allocatable. On Autopilot, the accelerator labels of the selector (or, for
a pod that selects a ComputeClass alone, of the class's first rule) and the
chips the pod asks for give the catalog shape Autopilot provisions.
"""

from __future__ import annotations

from collections.abc import Mapping

from core import catalog
from core.allocatable import Allocatable, node_allocatable
from core.machines import GKE_DEFAULT_BOOT_DISK_GB, MACHINES
from core.names import POOL_LABEL


def pool_node(node_pool_inputs: Mapping) -> tuple[str, Allocatable] | None:
    """(logical pool, allocatable of one node) of a declared node pool, or None if it isn't one of ours."""
    node = node_pool_inputs.get("nodeConfig") or {}
    pool = (node.get("labels") or {}).get(POOL_LABEL)
    machine = MACHINES.get(node.get("machineType", ""))
    if not isinstance(pool, str) or machine is None:
        return None
    disk = node.get("diskSizeGb") if isinstance(node.get("diskSizeGb"), (int, float)) else GKE_DEFAULT_BOOT_DISK_GB
    local_ssd = bool((node.get("ephemeralStorageLocalSsdConfig") or {}).get("localSsdCount"))
    return pool, node_allocatable(machine, disk, local_ssd)


def autopilot_shape(selector: Mapping[str, str], chips: int) -> catalog.Shape | None:
    """The catalog shape an Autopilot pod's accelerator selector and chip count ask for."""
    for shape in catalog.SHAPES:
        accelerator = shape.accelerator
        if selector.get(accelerator.node_label) != accelerator.gke_accelerator:
            continue
        if shape.topology and selector.get(catalog.TPU_TOPOLOGY_LABEL) != shape.topology:
            continue
        if shape.chips_per_vm == chips:
            return shape
    return None


def compute_class_selector(class_spec: Mapping) -> dict[str, str]:
    """The accelerator node labels a ComputeClass's first priority rule stands for (every rung of a
    ladder has the same shape): `tpu: {type, topology}` or `gpu: {type}` (manifests/compute_class.py)."""
    rules = class_spec.get("priorities") or [{}]
    tpu, gpu = rules[0].get("tpu"), rules[0].get("gpu")
    if isinstance(tpu, Mapping):
        return {catalog.TPU_V6E.node_label: tpu.get("type"), catalog.TPU_TOPOLOGY_LABEL: tpu.get("topology")}
    if isinstance(gpu, Mapping):
        return {catalog.NVIDIA_B200.node_label: gpu.get("type")}
    return {}


def autopilot_node(shape: catalog.Shape) -> Allocatable:
    return node_allocatable(shape.machine, GKE_DEFAULT_BOOT_DISK_GB, shape.local_ssd_count > 0)


def pod_chips(pod: Mapping) -> int:
    """Accelerator chips the pod's containers ask for (any accelerator resource)."""
    names = {a.resource_name for a in catalog.ACCELERATORS.values()}
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        limits = (container.get("resources") or {}).get("limits") or {}
        total += sum(int(v) for k, v in limits.items() if k in names)
    return total
