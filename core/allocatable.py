"""A GKE node's allocatable resources: what its pods may request, computed as GKE does.

GKE reserves part of every node for the kubelet, the container runtime and
the OS, and keeps an eviction threshold free; what is left is allocatable.
The formulas of "About GKE node sizing":
https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes#memory_cpu
https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes#local_ephemeral_storage_reservation

Checked against that page's worked example: a 100 GB boot disk, whose
filesystem reports 98831908Ki (94.25 GiB), has 47060071478 bytes (43.83 GiB)
of allocatable ephemeral storage: 94.25 - 10% eviction - min(50 GiB,
6 GiB + 35 GiB, 100 GiB).
"""

from __future__ import annotations

from dataclasses import dataclass

from core.machines import LOCAL_SSD_GIB, Machine

GIB = 2**30
MIB = 2**20

# The boot disk's OS partitions: its filesystem for ephemeral storage is this
# much smaller than the disk (100 GiB disk -> 94.25 GiB filesystem above).
BOOT_FILESYSTEM_OVERHEAD_GIB = 5.75

# (size of the tier in GiB, share reserved); the last tier is unbounded.
_MEMORY_TIERS = ((4, 0.25), (4, 0.20), (8, 0.10), (112, 0.06), (float("inf"), 0.02))
_MEMORY_SMALL_MACHINE_RESERVED_MIB = 255  # machines with less than 1 GiB
MEMORY_EVICTION_MIB = 100
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
    if memory_gib < 1:
        return _MEMORY_SMALL_MACHINE_RESERVED_MIB / 1024
    return _tiered(memory_gib, _MEMORY_TIERS)


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
    memory_gib = machine.memory_gib - reserved_memory_gib(machine.memory_gib) - MEMORY_EVICTION_MIB / 1024
    ephemeral = (local_ssd_ephemeral_gib(machine.local_ssd_count) if local_ssd_ephemeral
                 else boot_disk_ephemeral_gib(boot_disk_gb))
    return Allocatable(
        cpu=machine.vcpus - reserved_cpu(machine.vcpus),
        memory=memory_gib * GIB,
        ephemeral_storage=ephemeral * GIB,
    )
