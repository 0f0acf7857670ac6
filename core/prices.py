"""Prices per capacity: what an hour of a shape costs on demand, on Spot, through Dynamic Workload
Scheduler (flex-start, queued) and from a reservation, each with its source and the date it was read.

The on-demand list prices are the catalog's (core/catalog.py per TPU chip, core/machines.py per A4
VM). Google publishes no per-shape figure for v6e or A4 on Spot or through Dynamic Workload
Scheduler on the pages read (2026-12-02): the Spot pricing page states a bound ("discounts of up to
91% off of the corresponding default price for many machine types, GPUs, TPUs, and Local SSDs",
https://cloud.google.com/spot-vms/pricing), and GKE's flex-start page another ("discounts (up to
53%) on vCPUs, GPUs and TPUs", https://cloud.google.com/kubernetes-engine/docs/concepts/dws). Those
capacities are priced here as the range those bounds allow, never as an invented figure: the low
end is the deepest published discount, the high end the on-demand price, which no discount exceeds.
A reservation is billed at the on-demand rate whether or not anything runs on it, and "a VM
consuming a reservation doesn't incur separate charges"
(https://cloud.google.com/compute/docs/instances/reservations-overview#reservation-billing): the
reserved capacity's price is the on-demand one, paid for every hour the reservation exists, used or
not, so that is the price shown for it (never $0: a run on it is not free, its hours are paid
whether it runs or not). Committed-use discounts that may apply to a reservation are the account's,
not a list price, and are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.catalog import Shape

CAPACITIES = ("on-demand", "spot", "flex-start", "queued", "reservation")
READ_ON = "2026-12-02"
SPOT_SOURCE = ("https://cloud.google.com/spot-vms/pricing (\"discounts of up to 91% off of the corresponding "
               "default price for many machine types, GPUs, TPUs\"; no v6e or A4 Spot figure found)")
DWS_SOURCE = ("https://cloud.google.com/kubernetes-engine/docs/concepts/dws (flex-start and queued "
              "provisioning bill at Dynamic Workload Scheduler prices, \"discounts (up to 53%) on vCPUs, "
              "GPUs and TPUs\"; no v6e or A4 figure found)")
RESERVATION_SOURCE = ("https://cloud.google.com/compute/docs/instances/reservations-overview#reservation-billing "
                      "(a reservation bills at the on-demand rate until deleted, used or not; a VM consuming it "
                      "adds nothing to that)")
# The deepest discount each source states, as a share of the on-demand price.
MAX_DISCOUNT = {"spot": 0.91, "flex-start": 0.53, "queued": 0.53}
SOURCES = {"spot": SPOT_SOURCE, "flex-start": DWS_SOURCE, "queued": DWS_SOURCE, "reservation": RESERVATION_SOURCE}


class PriceError(ValueError):
    """A capacity the price table does not know; the message lists those it does."""

    def __init__(self, capacity: object):
        self.key, self.value, self.allowed = "capacity", capacity, ", ".join(CAPACITIES)
        super().__init__(f"capacity {capacity!r} has no price; allowed: {self.allowed}")


@dataclass(frozen=True)
class CapacityPrice:
    """$/hour of one unit (a chip, or a VM priced whole) on one capacity: a figure, or the range its
    source allows (`low` < `high`)."""

    capacity: str
    unit: str  # "chip" | "VM"
    low: float
    high: float
    as_of: str
    source: str
    note: str = ""

    @property
    def exact(self) -> bool:
        return self.low == self.high

    def scaled(self, units: float) -> tuple[float, float]:
        """The (low, high) $/hour of `units` units."""
        return self.low * units, self.high * units


def on_demand(shape: Shape) -> CapacityPrice:
    """The list price of one unit of the shape: its VM where a VM is priced whole (A4), else its chip."""
    vm = shape.machine.price
    if vm is not None:
        return CapacityPrice("on-demand", "VM", vm.usd_per_hour, vm.usd_per_hour, vm.as_of, vm.source)
    chip = shape.accelerator.price
    return CapacityPrice("on-demand", "chip", chip.usd_per_chip_hour, chip.usd_per_chip_hour, chip.as_of, chip.source)


def price(shape: Shape, capacity: str) -> CapacityPrice:
    """One unit of the shape on `capacity`, with its source; a PriceError for an unknown capacity."""
    if capacity not in CAPACITIES:
        raise PriceError(capacity)
    base = on_demand(shape)
    if capacity == "on-demand":
        return base
    if capacity == "reservation":
        return CapacityPrice(capacity, base.unit, base.low, base.high, READ_ON, RESERVATION_SOURCE,
                             f"the reserved capacity's price, {base.high:.2f} $/{base.unit}-hour at the on-demand "
                             "rate: paid for every hour the reservation exists, whether used or not")
    low = round(base.high * (1 - MAX_DISCOUNT[capacity]), 4)
    return CapacityPrice(capacity, base.unit, low, base.high, READ_ON, SOURCES[capacity],
                         f"at least {low:.4g}, at most the on-demand {base.high:.2f} $/{base.unit}-hour")


def units(shape: Shape, slices: int = 1) -> int:
    """How many of the price's units `slices` slices of the shape hold."""
    per_slice = shape.vms_per_slice if shape.machine.price is not None else shape.chips_per_slice
    return per_slice * slices


def usd_per_hour(shape: Shape, capacity: str, slices: int = 1) -> tuple[float, float]:
    """The (low, high) $/hour of `slices` slices of the shape on `capacity`."""
    return price(shape, capacity).scaled(units(shape, slices))
