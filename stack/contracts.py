"""The scheduling contract of each pool (Standard) or shape (Autopilot) of a stack.

Node pools (components/node_pools.py) create nodes that honour it, runs
(manifests/) consume it; both get it from here, as do the offline plan and
the tests. Pure functions of the stack's models.
"""

from __future__ import annotations

from core.catalog import (
    FLEX_START_LABEL,
    GPU_DRIVER_VERSION_LABEL,
    NODEPOOL_LABEL,
    QUEUED_LABEL,
    QUEUED_TAINT,
    RESERVATION_AFFINITY_LABEL,
    RESERVATION_NAME_LABEL,
    RESERVATION_PROJECT_LABEL,
    SPOT_LABEL,
    SPOT_TAINT,
    Family,
    Taint,
)
from core.contract import SchedulingContract
from core.machines import GKE_DEFAULT_BOOT_DISK_GB
from core.names import POOL_LABEL
from stack.models import PoolConfig, ShapeConfig


def node_pool_names(pool: str, slices: int) -> tuple[str, ...]:
    """GKE node pool names of a logical pool: the pool name, or one `-s<i>` per slice."""
    if slices == 1:
        return (pool,)
    return tuple(f"{pool}-s{i}" for i in range(slices))


def node_taints(group: ShapeConfig) -> tuple[Taint, ...]:
    """Taints the nodes carry: the accelerator's, plus spot's where spot.

    On Standard the node pool applies them; Autopilot taints the accelerator
    (and Spot) nodes it creates itself with the same keys.
    """
    taints = (group.shape().accelerator.taint,)
    if group.capacity == "spot":
        taints += (SPOT_TAINT,)
    return taints


def node_labels(pool: PoolConfig) -> dict[str, str]:
    """Kubernetes labels a Standard node pool declares on its nodes (beyond those GKE adds itself).

    Every accelerator pool labels its nodes with the logical pool name. A
    queued pool also declares `cloud.google.com/gke-queued: "true"`: GKE
    applies the queued taint to such nodes but not that label, which the
    pods (and Kueue's ResourceFlavor, hence the ProvisioningRequest's pod
    template) select; cluster-toolkit's gke-node-pool adds it by hand for
    this reason (modules/compute/gke-node-pool/main.tf, `queued_provisioning`),
    and xpk selects it (src/xpk/core/capacity.py).
    """
    labels = {POOL_LABEL: pool.name}
    if pool.capacity == "queued":
        labels[QUEUED_LABEL] = "true"
    return labels


def capacity_taints(group: ShapeConfig) -> tuple[Taint, ...]:
    """Taints GKE itself puts on the nodes of a capacity (queued), which pods must tolerate."""
    return (QUEUED_TAINT,) if group.capacity == "queued" else ()


def contract_for(group: ShapeConfig, autopilot: bool, existing: bool = False) -> SchedulingContract:
    """The contract of one pool (Standard) or shape (Autopilot) of the stack config; `existing`: a pool
    of an existing cluster, described by its GKE node pools (stack/existing.py), not declared here."""
    shape = group.shape()
    pool = isinstance(group, PoolConfig)
    selector = shape.node_selector()
    label, values = "", ()
    if autopilot:
        selector.update(_autopilot_capacity_selector(group))
        if shape.family is Family.GPU:
            selector[GPU_DRIVER_VERSION_LABEL] = "latest"
        names: tuple[str, ...] = ()
    else:
        label, names, values = _pool_nodes(group, existing)
        if len(values) == 1:
            selector[label] = values[0]
        if group.capacity == "spot":
            selector[SPOT_LABEL] = "true"
        # Only the platform's node pools declare the queued label (node_labels).
        if group.capacity == "queued" and not existing:
            selector[QUEUED_LABEL] = "true"
    return SchedulingContract(
        pool=group.name,
        pool_label=label,
        pool_values=values,
        shape=shape,
        slices=group.slices,
        node_selector=selector,
        tolerations=tuple(t.toleration() for t in node_taints(group) + capacity_taints(group)),
        node_pool_names=names,
        spot=group.capacity == "spot",
        reservation=group.reservation if group.capacity == "reservation" else None,
        autopilot=autopilot,
        # Autopilot sizes its nodes' boot disks itself: GKE's default is assumed.
        boot_disk_gb=group.disk_gb() if pool else GKE_DEFAULT_BOOT_DISK_GB,
        # Pools back ephemeral storage with the machine's bundled local SSDs
        # (components/node_pools.py); Autopilot does so on such machines too.
        local_ssd_ephemeral=shape.local_ssd_count > 0,
        capacity=group.capacity,
        max_vms=group.max_nodes() * group.slices if pool else 0,
        max_run_duration_seconds=group.max_run_duration() if pool and group.capacity == "queued" else None,
    )


def _pool_nodes(pool: PoolConfig, existing: bool) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """(the label the pool's nodes are selected by, its GKE node pools, the label's values on them).

    The platform's node pools label their nodes with the logical pool name
    (node_labels), one value for every slice. An existing cluster's nodes
    carry no label of the platform, but GKE labels every node with its node
    pool's name, `cloud.google.com/gke-nodepool`
    (https://cloud.google.com/kubernetes-engine/docs/concepts/node-pools, read 2026-12-02),
    so its pools are selected by their node pools' names.
    """
    if existing:
        names = pool.described_node_pools()
        return NODEPOOL_LABEL, names, names
    return POOL_LABEL, node_pool_names(pool.name, pool.slices), (pool.name,)


def derive_contracts(
    groups: tuple[ShapeConfig, ...], autopilot: bool, existing: bool = False
) -> dict[str, SchedulingContract]:
    """Contracts of every pool (Standard) or shape (Autopilot), by name."""
    return {g.name: contract_for(g, autopilot, existing) for g in groups}


def _autopilot_capacity_selector(group: ShapeConfig) -> dict[str, str]:
    if group.capacity == "spot":
        return {SPOT_LABEL: "true"}
    if group.capacity == "flex-start":
        return {FLEX_START_LABEL: "true"}
    if group.capacity == "reservation":
        return reservation_selector(group.reservation)
    return {}


def reservation_selector(reservation: str) -> dict[str, str]:
    """The node labels of an Autopilot reservation: its short name, and its project when shared.

    A node selector's values are label values (at most 63 characters, no
    `/`), so a shared reservation's `projects/<p>/reservations/<r>` path is
    split into the name and `cloud.google.com/reservation-project`; the path
    itself belongs only in a node pool's reservation affinity.
    https://cloud.google.com/kubernetes-engine/docs/how-to/consuming-reservations
    """
    project, name = reservation_parts(reservation)
    selector = {RESERVATION_NAME_LABEL: name, RESERVATION_AFFINITY_LABEL: "specific"}
    if project:
        selector[RESERVATION_PROJECT_LABEL] = project
    return selector


def reservation_parts(reservation: str) -> tuple[str | None, str]:
    """(the owning project of a shared `projects/<p>/reservations/<r>`, else None; the short name)."""
    project, _, name = reservation.rpartition("/reservations/")
    return (project.removeprefix("projects/") or None), name
