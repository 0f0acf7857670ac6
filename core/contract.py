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
from core.names import cluster_scoped, shared_flavor_name


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
    # How the pool gets its nodes (stack/models.py CAPACITIES), and the most VMs it may hold
    # (all slices; 0: the slices' VMs).
    capacity: str = "on-demand"
    max_vms: int = 0
    # The LocalQueue Kueue admits the pool's runs from, when the pool is one of
    # the stack's Kueue flavors (stack/queueing.py); None: runs are not queued.
    queue: str | None = None
    # The stack's namespace, which names the cluster-scoped objects that admit the pool's runs (its Kueue
    # ResourceFlavor, the priority classes, an Autopilot ladder's ComputeClass): core/names.py `cluster_scoped`.
    namespace: str = ""
    # Queued capacity: the longest a ProvisioningRequest's nodes may run.
    max_run_duration_seconds: int | None = None
    # A pool other stacks share (stack/sharing.py): this stack's part of its chips; None: the whole pool, unshared.
    share_chips: int | None = None
    # A shared pool's borrowing and lending limits in its cohort (chips; None: no limit): what this stack's queue
    # may borrow of the other stacks' idle quota of the pool, and lend of its own.
    borrow_chips: int | None = None
    lend_chips: int | None = None
    # Autopilot: the ComputeClass of a run's capacity ladder, whose priorities are
    # the ladder's rungs (stack/queueing.py); the selector then names it instead
    # of one shape's capacity labels. None: the shape's own capacity.
    compute_class: str | None = None
    # The node label a Standard pool's nodes are told apart by, and its values on the pool's nodes:
    # the platform's pool label and the pool's name, or in an existing cluster GKE's node pool label
    # and the pool's GKE node pools (one per slice). Empty on Autopilot.
    pool_label: str = ""
    pool_values: tuple[str, ...] = ()
    # A run Kueue admits: the values of `pool_label` on every rung of its ladder (stack/queueing.py
    # `run_contract`), which its pods' node affinity allows.
    rung_values: tuple[str, ...] = ()
    # The same run's rungs in order, each as the one value of `pool_label` that selects it, where every rung
    # has one (the ladder controller pins an evicted run to the next: manifests/ladder.py); else empty.
    rung_pins: tuple[str, ...] = ()

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

    @property
    def queued(self) -> bool:
        """Capacity only a ProvisioningRequest (Kueue's provisioning admission check) obtains."""
        return self.capacity == "queued"

    @property
    def vms(self) -> int:
        """The most VMs the pool holds at once."""
        return self.max_vms or self.hosts_per_slice * self.slices

    @property
    def quota_chips(self) -> int:
        """The chips the pool can hold at once."""
        return self.vms * self.chips_per_host

    @property
    def nominal_vms(self) -> int:
        """The VMs of the pool this stack's Kueue flavor holds: its share where the pool is shared, else all."""
        return self.share_chips // self.chips_per_host if self.shared else self.vms

    @property
    def nominal_chips(self) -> int:
        """This stack's Kueue flavor's quota of chips (stack/sharing.py)."""
        return self.nominal_vms * self.chips_per_host

    # A run that Kueue admits names only what every rung of its ladder shares
    # (the shape's labels and the accelerator's toleration); Kueue adds its
    # flavor's labels and tolerations, the rest of the contract, on admission.

    @property
    def pod_node_selector(self) -> dict[str, str]:
        """The selector a run's pods carry: the whole contract, or its shape's labels when queued."""
        if self.queue is None:
            return dict(self.node_selector)
        return {k: v for k, v in self.node_selector.items() if k in self.shape.node_selector()}

    @property
    def pod_tolerations(self) -> tuple[dict, ...]:
        if self.queue is None:
            return tuple(self.tolerations)
        return (self.shape.accelerator.taint.toleration(),)

    @property
    def shared(self) -> bool:
        """A pool other stacks' ClusterQueues share (`pools[].quota`): its flavor is theirs too, in one cohort."""
        return self.share_chips is not None

    @property
    def flavor(self) -> str:
        """The pool's Kueue ResourceFlavor (cluster-scoped): named after the stack's namespace and the pool, or,
        on a shared pool, after the nodes it selects, so that every stack sharing the pool names one flavor
        (Kueue lends and borrows quota only of a flavor the queues have in common)."""
        if self.shared:
            return shared_flavor_name(self.flavor_node_labels, self.flavor_tolerations)
        return cluster_scoped(self.namespace, self.pool)

    @property
    def flavor_node_labels(self) -> dict[str, str]:
        """The labels Kueue injects into an admitted pod's selector (its ResourceFlavor's nodeLabels)."""
        shared = self.pod_node_selector if self.queue else {}
        return {k: v for k, v in self.node_selector.items() if k not in shared}

    @property
    def flavor_tolerations(self) -> tuple[dict, ...]:
        """The tolerations Kueue adds to an admitted pod (its ResourceFlavor's tolerations)."""
        shared = self.pod_tolerations if self.queue else ()
        return tuple(t for t in self.tolerations if t not in shared)
