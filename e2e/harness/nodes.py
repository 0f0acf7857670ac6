"""GKE-shaped kwok nodes for every node pool a stack declares, from the pool's declared inputs alone.

The inputs are the NodePool's wire inputs as the Google provider receives
them (tools/offline.py records them); the nodes get what the pool declares
(its `nodeConfig.labels` and `nodeConfig.taints`) and what GKE documents
that it adds itself, never anything read from the runs, so a run selecting a
label no node carries stays Pending. What GKE adds:

- `cloud.google.com/gke-nodepool: <pool>` on every node
  (https://cloud.google.com/kubernetes-engine/docs/concepts/node-pools);
- TPU nodes: `cloud.google.com/gke-tpu-accelerator` and
  `cloud.google.com/gke-tpu-topology`, and the taint `google.com/tpu=present:NoSchedule`
  (https://cloud.google.com/kubernetes-engine/docs/concepts/tpus);
- GPU nodes: `cloud.google.com/gke-accelerator: <type>`, and the taint
  `nvidia.com/gpu=present:NoSchedule`; with a driver installation config,
  `cloud.google.com/gke-gpu-driver-version` (lower case, as the program's test expects it)
  (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus);
- Spot nodes: `cloud.google.com/gke-spot: "true"` and `cloud.google.com/gke-provisioning: spot`
  (https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms); no taint unless declared;
- flex-start nodes: `cloud.google.com/gke-flex-start: "true"`
  (https://cloud.google.com/kubernetes-engine/docs/how-to/dws-flex-start-training);
- queued-provisioning nodes: the taint `cloud.google.com/gke-queued=true:NoSchedule`, not the
  label (cluster-toolkit modules/compute/gke-node-pool/main.tf adds the label by hand for that
  reason), and `autoscaling.gke.io/provisioning-request: <name>` on the nodes made for one
  ProvisioningRequest (provisioner.py);
- the kubelet's well-known labels: kubernetes.io/hostname, kubernetes.io/os, kubernetes.io/arch,
  node.kubernetes.io/instance-type, topology.kubernetes.io/region and /zone
  (https://kubernetes.io/docs/reference/labels-annotations-taints/).

One node per VM: a multi-host TPU pool is one slice of `vms_per_slice` VMs;
other pools get their autoscaling maximum (or fixed count), as if the
cluster autoscaler had scaled them up. Capacity and allocatable come from
core/ (machines.py, allocatable.py) and the accelerator count per VM.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from core import catalog
from core.allocatable import capacity_memory_gib, node_allocatable
from core.machines import GKE_DEFAULT_BOOT_DISK_GB, LOCAL_SSD_GIB, MACHINES, Machine

GIB = 2**30
# GKE Standard's default maximum pods per node.
# https://cloud.google.com/kubernetes-engine/docs/how-to/flexible-pod-cidr
MAX_PODS = 110
# The system pool's machine: not an accelerator shape, so not in core/machines.py.
# https://cloud.google.com/compute/docs/general-purpose-machines#e2-standard (4 vCPUs, 16 GB)
SYSTEM_MACHINES = {"e2-standard-4": Machine("e2-standard-4", vcpus=4, memory_gib=16, boot_disk_type="pd-balanced",
                                            boot_disk_gb=GKE_DEFAULT_BOOT_DISK_GB)}
PROVISIONING_LABEL = "cloud.google.com/gke-provisioning"
GPU_NODE_TAINT = catalog.NVIDIA_B200.taint
TPU_NODE_TAINT = catalog.TPU_V6E.taint
_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "PREFER_NO_SCHEDULE": "PreferNoSchedule", "NO_EXECUTE": "NoExecute"}


@dataclass(frozen=True)
class PoolNodes:
    pool: str
    queued: bool
    nodes: tuple[dict, ...]


def _machine(name: str) -> Machine:
    found = MACHINES.get(name) or SYSTEM_MACHINES.get(name)
    if found is None:
        raise ValueError(f"e2e: nodeConfig.machineType {name!r} is in neither core/machines.py nor "
                         f"SYSTEM_MACHINES; allowed: {sorted(MACHINES) + sorted(SYSTEM_MACHINES)}")
    return found


def _tpu_shape(machine: str, topology: str | None) -> catalog.Shape | None:
    for shape in catalog.SHAPES:
        if shape.machine_type != machine or shape.family is not catalog.Family.TPU:
            continue
        if (topology and shape.topology == topology) or (not topology and shape.vms_per_slice == 1):
            return shape
    return None


def _vm_count(inputs: Mapping, shape: catalog.Shape | None) -> int:
    if shape is not None and shape.multi_host:
        return shape.vms_per_slice  # a multi-host pool is one slice
    scaling = inputs.get("autoscaling") or {}
    zones = len(inputs.get("nodeLocations") or []) or 1
    if "totalMaxNodeCount" in scaling:
        return int(scaling["totalMaxNodeCount"])
    if "maxNodeCount" in scaling:
        return int(scaling["maxNodeCount"]) * zones
    return int(inputs.get("nodeCount", inputs.get("initialNodeCount", 1)) or 1) * zones


def _taints(node: Mapping, shape: catalog.Shape | None, gpu: bool, queued: bool) -> list[dict]:
    taints = [{"key": t["key"], "value": t.get("value", ""), "effect": _EFFECTS.get(t["effect"], t["effect"])}
              for t in node.get("taints") or []]
    gke = ([TPU_NODE_TAINT] if shape is not None else []) + ([GPU_NODE_TAINT] if gpu else [])
    gke += [catalog.QUEUED_TAINT] if queued else []
    for t in gke:
        if not any(x["key"] == t.key and x["effect"] == t.effect for x in taints):
            taints.append({"key": t.key, "value": t.value, "effect": t.effect})
    return taints


def _gke_labels(inputs: Mapping, node: Mapping, shape: catalog.Shape | None) -> dict[str, str]:
    labels = {catalog.NODEPOOL_LABEL: inputs["name"]}
    if shape is not None:
        labels[shape.accelerator.node_label] = shape.accelerator.gke_accelerator
        labels[catalog.TPU_TOPOLOGY_LABEL] = shape.topology
    for accelerator in node.get("guestAccelerators") or []:
        labels[catalog.NVIDIA_B200.node_label] = accelerator["type"]
        driver = (accelerator.get("gpuDriverInstallationConfig") or {}).get("gpuDriverVersion")
        if driver:
            labels[catalog.GPU_DRIVER_VERSION_LABEL] = driver.lower()
    if node.get("spot"):
        labels[catalog.SPOT_LABEL] = "true"
        labels[PROVISIONING_LABEL] = "spot"
    if node.get("flexStart"):
        labels[catalog.FLEX_START_LABEL] = "true"
    return labels


def _resources(inputs: Mapping, node: Mapping, machine: Machine, shape: catalog.Shape | None) -> tuple[dict, dict]:
    disk = node.get("diskSizeGb") or machine.boot_disk_gb
    local_ssds = int((node.get("ephemeralStorageLocalSsdConfig") or {}).get("localSsdCount") or 0)
    allocatable = node_allocatable(machine, disk, local_ssds > 0)
    ephemeral_capacity = local_ssds * LOCAL_SSD_GIB if local_ssds else disk
    # Memory as the kubelet reports it: the kernel's MemTotal (core/allocatable.py), in Ki as it writes it.
    capacity = {"cpu": str(machine.vcpus), "memory": f"{int(capacity_memory_gib(machine.memory_gib) * 2**20)}Ki",
                "ephemeral-storage": f"{int(ephemeral_capacity)}Gi", "pods": str(MAX_PODS)}
    alloc = {"cpu": f"{int(allocatable.cpu * 1000)}m", "memory": f"{int(allocatable.memory // 2**20)}Mi",
             "ephemeral-storage": f"{int(allocatable.ephemeral_storage // 2**20)}Mi", "pods": str(MAX_PODS)}
    extended = {}
    if shape is not None:
        extended[shape.accelerator.resource_name] = str(shape.chips_per_vm)
    for accelerator in node.get("guestAccelerators") or []:
        extended[catalog.NVIDIA_B200.resource_name] = str(int(accelerator["count"]))
    return {**capacity, **extended}, {**alloc, **extended}


def pool_nodes(inputs: Mapping, cluster: str, region: str) -> PoolNodes:
    """The nodes of one declared node pool (wire inputs), as GKE would create them."""
    node = inputs.get("nodeConfig") or {}
    machine = _machine(node.get("machineType", ""))
    topology = (inputs.get("placementPolicy") or {}).get("tpuTopology")
    shape = _tpu_shape(machine.name, topology)
    gpu = bool(node.get("guestAccelerators"))
    queued = bool((inputs.get("queuedProvisioning") or {}).get("enabled"))
    zone = (inputs.get("nodeLocations") or [f"{region}-b"])[0]
    capacity, allocatable = _resources(inputs, node, machine, shape)
    labels = {**_gke_labels(inputs, node, shape), **(node.get("labels") or {})}
    nodes = []
    for index in range(_vm_count(inputs, shape)):
        name = f"gke-{cluster}-{inputs['name']}-{index}"[:63]
        nodes.append({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {
                **labels, "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": machine.name, "topology.kubernetes.io/region": region,
                "topology.kubernetes.io/zone": zone}},
            "spec": {"taints": _taints(node, shape, gpu, queued)},
            "status": {"capacity": capacity, "allocatable": allocatable},
        })
    return PoolNodes(inputs["name"], queued, tuple(nodes))


def stack_nodes(node_pools: Iterable[Mapping], cluster: str, region: str) -> list[PoolNodes]:
    return [pool_nodes(inputs, cluster, region) for inputs in node_pools]
