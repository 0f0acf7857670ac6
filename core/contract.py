"""The scheduling contract a pool publishes and every run consumes.

A run never spells a node label, a toleration or a chip count itself: it takes
them from the contract of the pool it names, so it cannot ask for a shape the
pool does not have. The stack layer derives contracts from pools and shapes
(stack/contracts.py); this is only their type.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.allocatable import Allocatable, node_allocatable
from core.catalog import Family, Shape


@dataclass(frozen=True)
class SchedulingContract:
    pool: str  # the logical pool name runs refer to
    shape: Shape
    slices: int
    node_selector: dict[str, str]  # every label a pod of this pool must select on
    tolerations: tuple[dict, ...]
    # GKE node pool names, one per slice; empty on Autopilot (no pools declared).
    node_pool_names: tuple[str, ...] = field(default=())
    spot: bool = False
    reservation: str | None = None
    # The nodes: Autopilot's (which it sizes and admits by its own rules) or a Standard pool's.
    autopilot: bool = False
    boot_disk_gb: int = 200
    # Ephemeral storage on the machine's local SSDs (else on the boot disk).
    local_ssd_ephemeral: bool = False

    @property
    def allocatable(self) -> Allocatable:
        """What a pod may request on one node of the pool (GKE's reservations taken off)."""
        return node_allocatable(self.shape.machine, self.boot_disk_gb, self.local_ssd_ephemeral)

    @property
    def family(self) -> Family:
        return self.shape.family

    @property
    def resource_name(self) -> str:
        return self.shape.accelerator.resource_name

    @property
    def chips_per_host(self) -> int:
        return self.shape.chips_per_vm

    @property
    def hosts_per_slice(self) -> int:
        return self.shape.vms_per_slice

    @property
    def total_chips(self) -> int:
        return self.shape.chips_per_slice * self.slices

    @property
    def multislice(self) -> bool:
        return self.family is Family.TPU and self.slices > 1
