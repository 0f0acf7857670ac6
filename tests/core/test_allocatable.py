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


@pytest.mark.parametrize("memory_gib, reserved_mib", [
    (0.5, 255),                                   # at most 1000 MiB: 255 MiB
    (4000 / 1024, 1000),                          # 25% of the first 4000 MiB ("4 GB")
    (16000 / 1024, 1000 + 800 + 800),             # + 20% of the next 4000, 10% of the next 8000
    (128000 / 1024, 1000 + 800 + 800 + 6720),     # + 6% of the next 112000
    (256, 1000 + 800 + 800 + 6720 + 2682),        # + 2% of the 134144 MiB above, floored to the MiB
])  # fmt: skip
def test_memory_reservation_tiers(memory_gib, reserved_mib):
    assert alloc.reserved_memory_gib(memory_gib) * 1024 == pytest.approx(reserved_mib)


# Real GKE nodes (COS): machine memory in MiB, the kubelet's capacity and allocatable in Ki.
# kubernetes/kubernetes#52650 (n1-standard-2); 2i2c-org/infrastructure#2121 (n2-highmem, GKE 1.25).
REAL_NODES = [
    ("n1-standard-2", 7680, 7664944, 5784880),
    ("n2-highmem-4", 32768, 32880872, 29085928),
    ("n2-highmem-16", 131072, 131919220, 122210676),
    ("n2-highmem-64", 524288, 528365196, 510603916),
]


@pytest.mark.parametrize("machine, memory_mib, capacity_ki, allocatable_ki", REAL_NODES)
def test_allocatable_from_a_real_capacity_is_exact(machine, memory_mib, capacity_ki, allocatable_ki):
    """GKE's reservation is taken from the machine's memory in 1000-MiB tiers: exact to the KiB."""
    allocatable = alloc.allocatable_memory_gib(memory_mib / 1024, capacity_gib=capacity_ki / 2**20)
    assert round(allocatable * 2**20) == allocatable_ki


@pytest.mark.parametrize("machine, memory_mib, capacity_ki, allocatable_ki", REAL_NODES)
def test_the_kubelet_capacity_model_is_within_its_margin_of_real_nodes(machine, memory_mib, capacity_ki,
                                                                     allocatable_ki):
    capacity = alloc.capacity_memory_gib(memory_mib / 1024) * 2**20
    assert capacity < memory_mib * 1024  # the kernel keeps some of the machine
    assert abs(capacity - capacity_ki) / capacity_ki < alloc.MEMORY_MODEL_MARGIN * 0.6
    allocatable = alloc.allocatable_memory_gib(memory_mib / 1024) * 2**20
    assert abs(allocatable - allocatable_ki) / allocatable_ki < alloc.MEMORY_MODEL_MARGIN * 0.6


def test_the_machines_memory_is_not_what_the_kubelet_counts():
    """What the nominal model missed: an A4 node reports ~62 GiB less capacity than its 3968 GiB."""
    a4 = MACHINES["a4-highgpu-8g"]
    capacity = alloc.capacity_memory_gib(a4.memory_gib)
    assert 3905 < capacity < 3906  # 3968 * 63/64 - 328 MiB
    node = alloc.node_allocatable(a4, 200, True)
    assert 3819 * GIB < node.memory < 3820 * GIB


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
