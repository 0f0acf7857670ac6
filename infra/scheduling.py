"""The scheduling contract a pool publishes and every run consumes.

A run never spells a node label, a toleration or a chip count itself: it takes
them from the contract of the pool it names, so it cannot ask for a shape the
pool does not have. Pure data, no Pulumi import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from infra.accelerators import (
    RESERVATION_AFFINITY_LABEL,
    RESERVATION_NAME_LABEL,
    SPOT_LABEL,
    Family,
    Shape,
    Taint,
)
from infra.names import POOL_LABEL

if TYPE_CHECKING:
    from infra.config import ShapeConfig, StackConfig


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


# --- deriving contracts from the stack config ----------------------------------

SPOT_TAINT = Taint(SPOT_LABEL, "true", "NoSchedule")
# Autopilot selectors: https://cloud.google.com/kubernetes-engine/docs/how-to/autopilot-spot-pods
# and https://cloud.google.com/kubernetes-engine/docs/how-to/dws-flex-start-training
FLEX_START_LABEL = "cloud.google.com/gke-flex-start"
GPU_DRIVER_VERSION_LABEL = "cloud.google.com/gke-gpu-driver-version"


def node_pool_names(pool: str, slices: int) -> tuple[str, ...]:
    """GKE node pool names of a logical pool: the pool name, or one `-s<i>` per slice."""
    if slices == 1:
        return (pool,)
    return tuple(f"{pool}-s{i}" for i in range(slices))


def node_taints(group: "ShapeConfig") -> tuple[Taint, ...]:
    """Taints a Standard pool's nodes carry: the accelerator's, plus spot's where spot."""
    taints = (group.shape().accelerator.taint,)
    if group.capacity == "spot":
        taints += (SPOT_TAINT,)
    return taints


def contract_for(group: "ShapeConfig", autopilot: bool) -> SchedulingContract:
    """The contract of one pool (Standard) or shape (Autopilot) of the stack config."""
    shape = group.shape()
    selector = shape.node_selector()
    if autopilot:
        selector.update(_autopilot_capacity_selector(group))
        if shape.family is Family.GPU:
            selector[GPU_DRIVER_VERSION_LABEL] = "latest"
        names: tuple[str, ...] = ()
    else:
        # Every accelerator node pool labels its nodes with the logical pool name.
        selector[POOL_LABEL] = group.name
        if group.capacity == "spot":
            selector[SPOT_LABEL] = "true"
        names = node_pool_names(group.name, group.slices)
    taints = node_taints(group) if not autopilot else _autopilot_taints(group)
    return SchedulingContract(
        pool=group.name,
        shape=shape,
        slices=group.slices,
        node_selector=selector,
        tolerations=tuple(t.toleration() for t in taints),
        node_pool_names=names,
        spot=group.capacity == "spot",
        reservation=group.reservation if group.capacity == "reservation" else None,
    )


def derive_contracts(config: "StackConfig") -> dict[str, SchedulingContract]:
    """Contracts of every pool (Standard) or shape (Autopilot), by name."""
    return {g.name: contract_for(g, config.autopilot) for g in config.accelerator_groups()}


def _autopilot_capacity_selector(group: "ShapeConfig") -> dict[str, str]:
    if group.capacity == "spot":
        return {SPOT_LABEL: "true"}
    if group.capacity == "flex-start":
        return {FLEX_START_LABEL: "true"}
    if group.capacity == "reservation":
        return {RESERVATION_NAME_LABEL: group.reservation, RESERVATION_AFFINITY_LABEL: "specific"}
    return {}


def _autopilot_taints(group: "ShapeConfig") -> tuple[Taint, ...]:
    # Autopilot taints the accelerator nodes (and Spot nodes) it creates itself;
    # the tolerations below match what it applies.
    return node_taints(group)
