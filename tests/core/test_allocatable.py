"""Node allocatable computed as GKE documents it, checked against the page's own numbers."""

import pytest

from core import allocatable as alloc
from core.machines import MACHINES, Machine

GIB = 2**30


def test_boot_disk_ephemeral_matches_the_documented_example():
    # plan-node-sizes: a 100 GB boot disk shows `ephemeral-storage: 47060071478` allocatable.
    assert alloc.boot_disk_ephemeral_gib(100) * GIB == pytest.approx(47060071478, rel=2e-3)


def test_cpu_reservation_matches_the_documented_example():
    # The same page's 4-vCPU node reports `cpu: 3920m` allocatable.
    assert 4 - alloc.reserved_cpu(4) == pytest.approx(3.92)


@pytest.mark.parametrize("memory_gib, reserved", [
    (0.5, 255 / 1024),                       # under 1 GiB: 255 MiB
    (4, 1.0),                                # 25% of the first 4 GiB
    (16, 1.0 + 0.8 + 0.8),                   # + 20% of the next 4, 10% of the next 8
    (128, 1.0 + 0.8 + 0.8 + 6.72),           # + 6% of the next 112
    (256, 1.0 + 0.8 + 0.8 + 6.72 + 2.56),    # + 2% above 128 GiB
])  # fmt: skip
def test_memory_reservation_tiers(memory_gib, reserved):
    assert alloc.reserved_memory_gib(memory_gib) == pytest.approx(reserved)


@pytest.mark.parametrize("ssds, reserved", [(1, 50), (2, 75), (3, 100), (32, 100)])
def test_local_ssd_ephemeral_reservation(ssds, reserved):
    assert alloc.local_ssd_ephemeral_gib(ssds) == pytest.approx(ssds * 375 * 0.9 - reserved)


def test_the_default_100_gb_boot_disk_cannot_hold_a_50_gi_fuse_cache():
    """Why TPU pools size their boot disk: 100 GB leaves ~44 GiB for every pod on the node."""
    node = alloc.node_allocatable(MACHINES["ct6e-standard-1t"], 100, local_ssd_ephemeral=False)
    assert 43 * GIB < node.ephemeral_storage < 45 * GIB < 50 * GIB


def test_a4_ephemeral_storage_is_its_local_ssds():
    machine = MACHINES["a4-highgpu-8g"]
    on_ssd = alloc.node_allocatable(machine, 200, local_ssd_ephemeral=True)
    on_disk = alloc.node_allocatable(machine, 200, local_ssd_ephemeral=False)
    assert on_ssd.ephemeral_storage > 10_000 * GIB > 350 * GIB > on_disk.ephemeral_storage


def test_allocatable_is_below_the_machine_on_every_axis():
    for machine in MACHINES.values():
        node = alloc.node_allocatable(machine, machine.boot_disk_gb, machine.local_ssd_count > 0)
        assert 0 < node.cpu < machine.vcpus and 0 < node.memory < machine.memory_gib * GIB
    tiny = alloc.node_allocatable(Machine("x", vcpus=1, memory_gib=0.5), 10, False)
    assert tiny.ephemeral_storage == 0  # a 10 GB disk leaves nothing after GKE's share
