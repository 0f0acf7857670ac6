"""A GKE node's capacity and allocatable resources: what its pods may request, computed as GKE does.

GKE reserves part of every node for the kubelet, the container runtime and
the OS, and keeps an eviction threshold free; what is left is allocatable.
The formulas of "About GKE node sizing":
https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes#memory_cpu
https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes#local_ephemeral_storage_reservation

Checked against that page's worked example: a 100 GB boot disk, whose
filesystem reports 98831908Ki (94.25 GiB), has 47060071478 bytes (43.83 GiB)
of allocatable ephemeral storage: 94.25 - 10% eviction - min(50 GiB,
6 GiB + 35 GiB, 100 GiB).

Memory as the kubelet sees it. The kubelet reports `capacity.memory` from
the kernel's MemTotal, which is smaller than the machine's memory: the
kernel keeps a struct page (64 bytes) per 4 KiB page, a 64 MiB software
IOTLB, and a little more. The cluster autoscaler's GCE provider models that
loss (kubernetes/autoscaler cluster-autoscaler/cloudprovider/gce/gce_reserved.go,
CalculateKernelReserved, Container-Optimized OS): memory/64 + 16 MiB, + 64 MiB
above 3 GiB, + 8 MiB up to 8 GiB, + min(0.175% of memory, 248 MiB). GKE's
reservation is then taken from the machine's memory in MiB with tier
breakpoints every "GB" of 1000 MiB (the same file's kube-reserved model,
which reproduces real nodes to the KiB), and allocatable = capacity - that
reservation - the 100 MiB eviction threshold. Checked in tests/core against
real GKE nodes (n1-standard-2, n2-highmem-4/16/64); the capacity model is
within 0.6% of them, so the fit keeps a stated margin on memory
(MEMORY_MODEL_MARGIN), since nodes above 512 GiB (ct6e, A4) were not seen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from core.machines import LOCAL_SSD_GIB, Machine

GIB = 2**30
MIB = 2**20

# The boot disk's OS partitions: its filesystem for ephemeral storage is this
# much smaller than the disk (100 GiB disk -> 94.25 GiB filesystem above).
BOOT_FILESYSTEM_OVERHEAD_GIB = 5.75

# (size of the tier in MiB, share reserved); the last tier is unbounded. GKE's
# "first 4 GB, next 4 GB, ..." are 4000 MiB steps of the machine's memory.
_MEMORY_TIERS = ((4000, 0.25), (4000, 0.20), (8000, 0.10), (112000, 0.06), (float("inf"), 0.02))
_MEMORY_SMALL_MACHINE_MIB = 1000
_MEMORY_SMALL_MACHINE_RESERVED_MIB = 255  # machines of at most 1000 MiB
MEMORY_EVICTION_MIB = 100
# The kernel's share of the machine's memory (gce_reserved.go, COS).
_KERNEL_RESERVED_RATIO = 64
_KERNEL_RESERVED_MIB = 16
_SWIOTLB_MIB, _SWIOTLB_ABOVE_MIB = 64, 3 * 1024
_LOW_MEMORY_OFFSET_MIB, _LOW_MEMORY_UP_TO_MIB = 8, 8 * 1024
_KERNEL_CORRECTION_SHARE, _KERNEL_CORRECTION_MAX_MIB = 0.00175, 248
# What the fit leaves free of a node's modelled allocatable memory, for the
# capacity model's error (within 0.6% on the nodes checked).
MEMORY_MODEL_MARGIN = 0.01
# (cores in the tier, share reserved)
_CPU_TIERS = ((1, 0.06), (1, 0.01), (2, 0.005), (float("inf"), 0.0025))
EPHEMERAL_EVICTION_SHARE = 0.10
# Local SSD backed ephemeral storage: reservation by the number of SSDs (3 and more: 100 GiB).
_LOCAL_SSD_RESERVED_GIB = {1: 50, 2: 75}
_LOCAL_SSD_RESERVED_MAX_GIB = 100


@dataclass(frozen=True)
class Allocatable:
    cpu: float  # cores
    memory: float  # bytes
    ephemeral_storage: float  # bytes

    def get(self, resource: str) -> float:
        return {"cpu": self.cpu, "memory": self.memory, "ephemeral-storage": self.ephemeral_storage}[resource]


def _tiered(total: float, tiers: tuple[tuple[float, float], ...]) -> float:
    reserved, left = 0.0, total
    for size, share in tiers:
        step = min(left, size)
        reserved += step * share
        left -= step
        if left <= 0:
            break
    return reserved


def reserved_memory_gib(memory_gib: float) -> float:
    """GKE's memory reservation (kubelet and system) of a machine with `memory_gib`, in GiB."""
    memory_mib = memory_gib * 1024
    if memory_mib <= _MEMORY_SMALL_MACHINE_MIB:
        return _MEMORY_SMALL_MACHINE_RESERVED_MIB / 1024
    return math.floor(_tiered(memory_mib, _MEMORY_TIERS)) / 1024


def kernel_reserved_mib(memory_mib: float) -> float:
    """Memory the kernel keeps for itself before the kubelet counts capacity (COS nodes)."""
    reserved = memory_mib / _KERNEL_RESERVED_RATIO + _KERNEL_RESERVED_MIB
    if memory_mib > _SWIOTLB_ABOVE_MIB:
        reserved += _SWIOTLB_MIB
    if memory_mib <= _LOW_MEMORY_UP_TO_MIB:
        reserved += _LOW_MEMORY_OFFSET_MIB
    return reserved + min(_KERNEL_CORRECTION_SHARE * memory_mib, _KERNEL_CORRECTION_MAX_MIB)


def capacity_memory_gib(memory_gib: float) -> float:
    """The node's `capacity.memory` as the kubelet reports it (the kernel's MemTotal), in GiB."""
    return memory_gib - kernel_reserved_mib(memory_gib * 1024) / 1024


def allocatable_memory_gib(memory_gib: float, capacity_gib: float | None = None) -> float:
    """The node's allocatable memory: its capacity less GKE's reservation and the eviction threshold."""
    capacity = capacity_memory_gib(memory_gib) if capacity_gib is None else capacity_gib
    return capacity - reserved_memory_gib(memory_gib) - MEMORY_EVICTION_MIB / 1024


def reserved_cpu(vcpus: float) -> float:
    return _tiered(vcpus, _CPU_TIERS)


def boot_disk_ephemeral_gib(boot_disk_gb: float) -> float:
    """Allocatable ephemeral storage of a node whose ephemeral storage is its boot disk."""
    filesystem = boot_disk_gb - BOOT_FILESYSTEM_OVERHEAD_GIB
    system = min(0.5 * boot_disk_gb, 6 + 0.35 * boot_disk_gb, 100)
    return max(0.0, filesystem * (1 - EPHEMERAL_EVICTION_SHARE) - system)


def local_ssd_ephemeral_gib(count: int) -> float:
    """Allocatable ephemeral storage of a node whose ephemeral storage is `count` local SSDs."""
    capacity = count * LOCAL_SSD_GIB
    system = _LOCAL_SSD_RESERVED_GIB.get(count, _LOCAL_SSD_RESERVED_MAX_GIB)
    return max(0.0, capacity * (1 - EPHEMERAL_EVICTION_SHARE) - system)


def node_allocatable(machine: Machine, boot_disk_gb: float, local_ssd_ephemeral: bool) -> Allocatable:
    """What pods may request on a node of `machine`, its ephemeral storage on local SSD or the boot disk."""
    memory_gib = allocatable_memory_gib(machine.memory_gib)
    ephemeral = (local_ssd_ephemeral_gib(machine.local_ssd_count) if local_ssd_ephemeral
                 else boot_disk_ephemeral_gib(boot_disk_gb))
    return Allocatable(
        cpu=machine.vcpus - reserved_cpu(machine.vcpus),
        memory=memory_gib * GIB,
        ephemeral_storage=ephemeral * GIB,
    )
