"""The accelerator catalog: the v6e table as GKE documents it, and the A4 row."""

import pytest

from core import catalog
from core.catalog import CatalogError, Family

# topology -> {machine type: (VMs per slice, chips per VM)}
# https://cloud.google.com/kubernetes-engine/docs/concepts/plan-tpus (v6e)
V6E_TABLE = {
    "1x1": {"ct6e-standard-1t": (1, 1)},
    "2x2": {"ct6e-standard-4t": (1, 4)},
    "2x4": {"ct6e-standard-8t": (1, 8), "ct6e-standard-4t": (2, 4)},
    "4x4": {"ct6e-standard-4t": (4, 4)},
    "4x8": {"ct6e-standard-4t": (8, 4)},
    "8x8": {"ct6e-standard-4t": (16, 4)},
    "8x16": {"ct6e-standard-4t": (32, 4)},
    "16x16": {"ct6e-standard-4t": (64, 4)},
}


@pytest.mark.parametrize("topology", sorted(V6E_TABLE))
def test_v6e_rows_match_the_gke_table(topology):
    rows = {s.machine_type: (s.vms_per_slice, s.chips_per_vm)
            for s in catalog.shapes_of("tpu-v6e") if s.topology == topology}
    assert rows == V6E_TABLE[topology]


def test_every_v6e_topology_is_in_the_catalog_and_nothing_else():
    assert {s.topology for s in catalog.shapes_of("tpu-v6e")} == set(V6E_TABLE)


def test_default_machine_type_is_the_fewest_vms():
    assert catalog.lookup("tpu-v6e", "2x4", None).machine_type == "ct6e-standard-8t"
    assert catalog.lookup("tpu-v6e", "4x4", None).vms_per_slice == 4


def test_multislice_only_on_multi_host_slices():
    assert catalog.lookup("tpu-v6e", "2x4", "ct6e-standard-4t").multislice_capable
    assert not catalog.lookup("tpu-v6e", "2x4", "ct6e-standard-8t").multislice_capable
    assert not catalog.lookup("nvidia-b200", None, None).multislice_capable


def test_a4_row():
    a4 = catalog.lookup("nvidia-b200", None, "a4-highgpu-8g")
    assert (a4.family, a4.vms_per_slice, a4.chips_per_vm) == (Family.GPU, 1, 8)
    assert a4.accelerator.resource_name == "nvidia.com/gpu"
    assert a4.node_selector() == {"cloud.google.com/gke-accelerator": "nvidia-b200"}
    assert a4.accelerator.taint.toleration() == {
        "key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}


def test_tpu_facts():
    s = catalog.lookup("tpu-v6e", "2x4", "ct6e-standard-4t")
    assert s.accelerator.resource_name == "google.com/tpu"
    assert s.node_selector() == {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                                 "cloud.google.com/gke-tpu-topology": "2x4"}
    assert s.accelerator.peak_bf16_flops_per_chip == 918e12
    assert s.usd_per_hour(slices=2) == pytest.approx(16 * s.accelerator.price.usd_per_chip_hour)


def test_every_shape_has_a_dated_sourced_list_price():
    for shape in catalog.SHAPES:
        price = shape.list_price
        assert shape.usd_per_hour() > 0 and price.as_of and price.source.startswith("https://")


@pytest.mark.parametrize("args, needle", [
    (("tpu-v6e", "3x3", None), "allowed: ['1x1'"),
    (("tpu-v6e", "2x4", "ct6e-standard-1t"), "allowed: ['ct6e-standard-4t', 'ct6e-standard-8t']"),
    (("tpu-v5p", "2x2", None), "allowed: ['nvidia-b200', 'tpu-v6e']"),
    (("nvidia-b200", "2x2", None), "which takes none"),
])
def test_lookup_errors_say_what_is_allowed(args, needle):
    with pytest.raises(CatalogError, match=None) as err:
        catalog.lookup(*args)
    assert needle in str(err.value)


def test_bundled_local_ssds():
    # https://cloud.google.com/compute/docs/accelerator-optimized-machines#a4-vms: 32 x 375 GiB
    assert catalog.A4_SHAPE.local_ssd_count == 32
    assert all(s.local_ssd_count == 0 for s in catalog.shapes_of("tpu-v6e"))
