"""The Compute Engine machine types behind the accelerator shapes: size, disks and VM prices.

What a node's allocatable is computed from (core/allocatable.py), what its
boot disk must be, and what a VM bills when it is priced as a whole. Sizes
in GiB, as Compute Engine states machine memory.
Sources:
- https://cloud.google.com/tpu/docs/v6e (ct6e machine types, DRAM per host)
- https://cloud.google.com/compute/docs/accelerator-optimized-machines#a4-vms
  (a4-highgpu-8g: 8 B200, 224 vCPUs, 3,968 GB, 32 local SSDs of 375 GiB)
- cluster-toolkit examples/gke-tpu-v6e and xpk blueprint a4.yaml: boot disks
  of these machines are Hyperdisk Balanced
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VmPrice:
    """On-demand list price of the whole VM for one hour, and where it was read."""

    usd_per_hour: float
    as_of: str
    source: str


@dataclass(frozen=True)
class Machine:
    name: str
    vcpus: int
    memory_gib: float
    # Hyperdisk Balanced: the boot disk type these machine series take
    # (they don't attach Persistent Disk).
    boot_disk_type: str = "hyperdisk-balanced"
    # The boot disk a pool of this machine gets when the stack sizes none. GKE's
    # own default is 100 GB (https://cloud.google.com/kubernetes-engine/docs/how-to/custom-boot-disks),
    # whose ~44 GiB of allocatable ephemeral storage is tight beside multi-GB
    # trainer images; 200 GB leaves ~99 GiB (core/allocatable.py).
    boot_disk_gb: int = 200
    # Bundled 375 GiB local SSDs (Titanium SSD on A4).
    local_ssd_count: int = 0
    # A VM priced as a whole; None where the accelerator's chip-hour price covers the VM (TPU).
    price: VmPrice | None = None


LOCAL_SSD_GIB = 375
# GKE's boot disk when none is sized, as on the nodes Autopilot creates.
# https://cloud.google.com/kubernetes-engine/docs/how-to/custom-boot-disks
GKE_DEFAULT_BOOT_DISK_GB = 100

MACHINES: dict[str, Machine] = {
    m.name: m
    for m in (
        Machine("ct6e-standard-1t", vcpus=44, memory_gib=176),
        Machine("ct6e-standard-4t", vcpus=180, memory_gib=720),
        Machine("ct6e-standard-8t", vcpus=180, memory_gib=1440),
        Machine(
            "a4-highgpu-8g", vcpus=224, memory_gib=3968, local_ssd_count=32,
            price=VmPrice(
                usd_per_hour=90.22,
                as_of="2026-07-22",
                source="https://cloud.google.com/products/compute/pricing/accelerator-optimized "
                "(a4-highgpu-8g on-demand, us-central1; GPUs, vCPUs, memory and local SSD together; approximate)",
            ),
        ),
    )
}


def machine(name: str) -> Machine:
    return MACHINES[name]
