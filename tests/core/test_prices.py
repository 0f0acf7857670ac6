"""Prices per capacity (core/prices.py): a figure or a sourced range per capacity, per chip or per VM."""

from __future__ import annotations

import pytest

from core import catalog, prices

V6E_2X4 = catalog.lookup("tpu-v6e", "2x4", "ct6e-standard-4t")
V6E_1X1 = catalog.lookup("tpu-v6e", "1x1", None)
A4 = catalog.A4_SHAPE


@pytest.mark.parametrize("shape", catalog.SHAPES, ids=lambda s: s.description)
@pytest.mark.parametrize("capacity", prices.CAPACITIES)
def test_every_shape_has_a_dated_sourced_price_on_every_capacity(shape, capacity):
    price = prices.price(shape, capacity)
    assert price.capacity == capacity
    assert price.source.startswith("https://") and price.as_of[:4] == "2026"
    assert 0 <= price.low <= price.high
    on_demand = prices.on_demand(shape).high
    assert price.high <= on_demand  # no capacity is dearer than on demand


def test_on_demand_is_the_list_price_per_chip_for_tpus_and_per_vm_for_a4():
    assert prices.price(V6E_2X4, "on-demand").unit == "chip"
    assert prices.usd_per_hour(V6E_2X4, "on-demand") == (pytest.approx(21.60), pytest.approx(21.60))  # 8 x 2.70
    assert prices.usd_per_hour(V6E_2X4, "on-demand", slices=2) == (pytest.approx(43.20), pytest.approx(43.20))
    assert prices.price(A4, "on-demand").unit == "VM"
    assert prices.usd_per_hour(A4, "on-demand") == (pytest.approx(90.22), pytest.approx(90.22))


def test_spot_and_dws_are_the_ranges_their_published_discounts_allow():
    # Spot: up to 91% off; 2.70 x 0.09 = 0.243 per chip, x 8 chips = 1.944 for a 2x4 slice.
    spot = prices.price(V6E_2X4, "spot")
    assert (spot.low, spot.high) == (pytest.approx(0.243), pytest.approx(2.70)) and not spot.exact
    assert prices.usd_per_hour(V6E_2X4, "spot") == (pytest.approx(1.944), pytest.approx(21.60))
    # Flex-start and queued (Dynamic Workload Scheduler): up to 53% off; 90.22 x 0.47 = 42.4034 per A4 VM.
    for capacity in ("flex-start", "queued"):
        assert prices.usd_per_hour(A4, capacity) == (pytest.approx(42.4034), pytest.approx(90.22))
        assert prices.price(A4, capacity).source == prices.DWS_SOURCE
    assert prices.price(A4, "spot").source == prices.SPOT_SOURCE


def test_a_reservation_costs_the_reserved_capacity_s_price_and_says_so():
    """A reservation bills at the on-demand rate whether used or not: its price is never $0."""
    price = prices.price(A4, "reservation")
    assert price.exact and price.high == pytest.approx(90.22) and price.unit == "VM"
    assert "the reserved capacity's price" in price.note and "whether used or not" in price.note
    assert prices.usd_per_hour(V6E_2X4, "reservation", slices=3) == (pytest.approx(64.80), pytest.approx(64.80))


@pytest.mark.parametrize("shape", catalog.SHAPES, ids=lambda s: s.description)
def test_one_list_price_per_shape_and_no_chips_dearer_than_their_vm(shape):
    """Compute Engine bills an accelerator-optimized VM for its GPUs, vCPUs, memory and local SSD
    together: where the VM is priced whole, a per-chip figure beside it could only disagree (its
    chips priced above the whole VM); the chip carries none and the shape has one figure."""
    vm, chip = shape.machine.price, shape.accelerator.price
    if vm is not None and chip is not None:
        assert chip.usd_per_chip_hour * shape.chips_per_vm <= vm.usd_per_hour, (chip, vm)
    assert (vm is None) != (chip is None), (vm, chip)
    assert prices.on_demand(shape).source == (vm or chip).source


def test_an_unknown_capacity_names_the_key_the_value_and_what_is_allowed():
    with pytest.raises(prices.PriceError) as err:
        prices.price(V6E_1X1, "preemptible")
    assert str(err.value) == ("capacity 'preemptible' has no price; "
                              "allowed: on-demand, spot, flex-start, queued, reservation")
