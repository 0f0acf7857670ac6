"""The accelerator catalog: every GKE accelerator fact the platform relies on.

This is the only file that spells a TPU topology, a machine type, a GKE node
label or an accelerator resource name. Node pools, run manifests, config
validation and cost estimates all read it. It is a module of the pure-facts
layer (`core/`): no pydantic, no Pulumi.

TPU rows are generated from the topology (as xpk does): the chip count of a
topology decides whether it fits one VM or spans several 4-chip VMs.
Sources:
- https://cloud.google.com/kubernetes-engine/docs/concepts/plan-tpus (v6e table)
- https://cloud.google.com/tpu/docs/v6e (918 bf16 TFLOP/s, 32 GB HBM per chip)
- https://cloud.google.com/tpu/docs/tpu-gke-multislice (multislice needs
  multi-host slices)
- https://cloud.google.com/compute/docs/accelerator-optimized-machines#a4-vms
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from core.machines import Machine, VmPrice, machine


class Family(str, enum.Enum):
    TPU = "tpu"
    GPU = "gpu"


@dataclass(frozen=True)
class ListPrice:
    """On-demand list price of one chip for one hour, and where it was read."""

    usd_per_chip_hour: float
    as_of: str
    source: str


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def toleration(self) -> dict:
        """The pod toleration that lets a workload land on a node with this taint."""
        return {"key": self.key, "operator": "Equal", "value": self.value, "effect": self.effect}


@dataclass(frozen=True)
class Accelerator:
    """One accelerator chip type, as GKE names and schedules it."""

    name: str  # the catalog key stack files use
    family: Family
    node_label: str  # the GKE node label whose value selects this chip
    gke_accelerator: str  # that label's value
    resource_name: str  # the extended resource a container requests
    taint: Taint  # GKE taints accelerator nodes so only accelerator pods land there
    peak_bf16_flops_per_chip: float
    hbm_gib_per_chip: int
    # None: sold only inside a VM priced whole (core/machines.py), the one figure for it.
    price: ListPrice | None
    # What a plan says of on-demand capacity when it is rarely there to be had.
    on_demand_note: str = ""
    # The largest trainer requests known to be admitted on Autopilot, by
    # resource (Kubernetes quantities); requests are capped at these there.
    autopilot_request_caps: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Shape:
    """A schedulable unit: one slice (TPU) or one machine (GPU) of an accelerator."""

    accelerator: Accelerator
    machine_type: str
    topology: str | None  # TPU only, e.g. "2x4"
    vms_per_slice: int
    chips_per_vm: int

    @property
    def machine(self) -> Machine:
        """The VM's size, disks and price (core/machines.py)."""
        return machine(self.machine_type)

    @property
    def local_ssd_count(self) -> int:
        """375 GiB local SSDs that come with the machine type (A4: 32, 12,000 GiB); node
        pools back the nodes' ephemeral storage with them."""
        return self.machine.local_ssd_count

    @property
    def family(self) -> Family:
        return self.accelerator.family

    @property
    def chips_per_slice(self) -> int:
        return self.vms_per_slice * self.chips_per_vm

    @property
    def multi_host(self) -> bool:
        return self.vms_per_slice > 1

    @property
    def multislice_capable(self) -> bool:
        # GKE runs Multislice only across multi-host TPU slices.
        return self.family is Family.TPU and self.multi_host

    @property
    def description(self) -> str:
        where = f"{self.topology} on " if self.topology else ""
        return f"{self.accelerator.name} {where}{self.vms_per_slice}x {self.machine_type}"

    def node_selector(self) -> dict[str, str]:
        """Labels GKE puts on every node of this shape (pool name and capacity excluded)."""
        selector = {self.accelerator.node_label: self.accelerator.gke_accelerator}
        if self.topology:
            selector[TPU_TOPOLOGY_LABEL] = self.topology
        return selector

    def usd_per_hour(self, slices: int = 1) -> float:
        """On-demand $/hour of `slices` slices: the VMs' price where a VM is priced whole (A4:
        GPUs, vCPUs, memory and local SSDs), else the chips' (a TPU chip-hour covers its host)."""
        vm = self.machine.price
        if vm is not None:
            return vm.usd_per_hour * self.vms_per_slice * slices
        return self.chips_per_slice * slices * self.list_price.usd_per_chip_hour

    @property
    def list_price(self) -> ListPrice | VmPrice:
        """The one on-demand figure of the shape: its VM's where the VM is priced whole, else its chip's."""
        price = self.machine.price or self.accelerator.price
        if price is None:
            raise ValueError(f"{self.description}: neither the machine nor the accelerator has a list price")
        return price

    @property
    def price_as_of(self) -> str:
        return self.list_price.as_of

    @property
    def price_source(self) -> str:
        return self.list_price.source


# --- GKE node labels, taints and keys ----------------------------------------------------
TPU_TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
SPOT_LABEL = "cloud.google.com/gke-spot"
RESERVATION_NAME_LABEL = "cloud.google.com/reservation-name"
RESERVATION_AFFINITY_LABEL = "cloud.google.com/reservation-affinity"
# The project owning a shared reservation, beside its short name (Autopilot).
# https://cloud.google.com/kubernetes-engine/docs/how-to/consuming-reservations#consuming_a_shared_reservation
RESERVATION_PROJECT_LABEL = "cloud.google.com/reservation-project"
# Autopilot selectors: https://cloud.google.com/kubernetes-engine/docs/how-to/autopilot-spot-pods
# and https://cloud.google.com/kubernetes-engine/docs/how-to/dws-flex-start-training
FLEX_START_LABEL = "cloud.google.com/gke-flex-start"
GPU_DRIVER_VERSION_LABEL = "cloud.google.com/gke-gpu-driver-version"
# The reservation key of a node pool's SPECIFIC_RESERVATION affinity.
# https://cloud.google.com/kubernetes-engine/docs/how-to/consuming-reservations
RESERVATION_AFFINITY_KEY = "compute.googleapis.com/reservation-name"
# The label a pod selects a (custom) ComputeClass with; GKE creates that class's nodes for it.
# https://cloud.google.com/kubernetes-engine/docs/concepts/about-custom-compute-classes
COMPUTE_CLASS_LABEL = "cloud.google.com/compute-class"

TPU_V6E = Accelerator(
    name="tpu-v6e",
    family=Family.TPU,
    node_label="cloud.google.com/gke-tpu-accelerator",
    gke_accelerator="tpu-v6e-slice",
    resource_name="google.com/tpu",
    taint=Taint("google.com/tpu", "present", "NoSchedule"),
    peak_bf16_flops_per_chip=918e12,
    hbm_gib_per_chip=32,
    price=ListPrice(
        usd_per_chip_hour=2.70,
        as_of="2026-11-30",
        source="https://cloud.google.com/tpu/pricing (v6e on-demand, us-east1)",
    ),
)

NVIDIA_B200 = Accelerator(
    name="nvidia-b200",
    family=Family.GPU,
    node_label="cloud.google.com/gke-accelerator",
    gke_accelerator="nvidia-b200",
    resource_name="nvidia.com/gpu",
    taint=Taint("nvidia.com/gpu", "present", "NoSchedule"),
    # Dense bf16 tensor-core peak (the 4.5 PFLOP/s figure assumes 2:4 sparsity).
    peak_bf16_flops_per_chip=2.25e15,
    hbm_gib_per_chip=180,
    # No per-GPU figure: a B200 comes only in an A4 VM, which Compute Engine bills for its
    # GPUs, vCPUs, memory and bundled local SSD together, priced whole in core/machines.py
    # (https://cloud.google.com/compute/docs/accelerator-optimized-machines, "Pricing and
    # consumption options"). A second figure per GPU could only disagree with it: 8 GPUs
    # can't cost more than the VM they come in (tests/core/test_prices.py).
    price=None,
    # A4 capacity comes through reservations, flex-start (DWS) or Spot; GKE's and
    # cluster-toolkit's A4 guides all start from a reservation.
    # https://cloud.google.com/kubernetes-engine/docs/concepts/consumption-options
    on_demand_note="B200 on demand is rarely obtainable; use a reservation, flex-start or spot",
    # Memory and ephemeral storage: what the GKE A4 tutorial's Autopilot pod
    # requests (1200Gi, 350Gi). CPU: below the VM's 224 vCPUs less Autopilot's
    # system share; Autopilot's published maximum for B200 pods is not encoded here.
    autopilot_request_caps=(("cpu", "200"), ("memory", "1200Gi"), ("ephemeral-storage", "350Gi")),
)

# GKE taints Spot nodes of a Standard pool only when asked; Autopilot taints its own.
SPOT_TAINT = Taint(SPOT_LABEL, "true", "NoSchedule")

# Nodes of a queued-provisioning pool (Dynamic Workload Scheduler) carry this
# label and taint; a pod needs the toleration, and selects the label.
# https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest and
# cluster-toolkit examples/gke-consumption-options/dws-flex-start-queued-provisioning/gke-tpu-v6e/
# (tpu-v6e-test-job.yaml); xpk src/xpk/core/capacity.py selects the same label.
QUEUED_LABEL = "cloud.google.com/gke-queued"
QUEUED_TAINT = Taint(QUEUED_LABEL, "true", "NoSchedule")
# The label GKE gives the nodes it provisions for one ProvisioningRequest; Kueue
# pins a run's pods to them (ProvisioningRequestConfig podSetUpdates), as xpk
# does (src/xpk/templates/kueue_config.yaml.j2, value `ResizeRequestName`).
PROVISIONING_REQUEST_LABEL = "autoscaling.gke.io/provisioning-request"

ACCELERATORS: dict[str, Accelerator] = {a.name: a for a in (TPU_V6E, NVIDIA_B200)}

# Every topology GKE offers for v6e. A slice of at most 8 chips can sit on one VM.
V6E_TOPOLOGIES = ("1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16")
_V6E_SINGLE_VM_MACHINE = {1: "ct6e-standard-1t", 4: "ct6e-standard-4t", 8: "ct6e-standard-8t"}
_V6E_MULTI_VM_MACHINE = "ct6e-standard-4t"
_V6E_MULTI_VM_CHIPS = 4


def topology_chips(topology: str) -> int:
    return math.prod(int(d) for d in topology.split("x"))


def _v6e_shapes(topology: str) -> list[Shape]:
    chips = topology_chips(topology)
    shapes = []
    if chips in _V6E_SINGLE_VM_MACHINE:
        shapes.append(Shape(TPU_V6E, _V6E_SINGLE_VM_MACHINE[chips], topology, 1, chips))
    if chips > _V6E_MULTI_VM_CHIPS:
        vms = chips // _V6E_MULTI_VM_CHIPS
        shapes.append(Shape(TPU_V6E, _V6E_MULTI_VM_MACHINE, topology, vms, _V6E_MULTI_VM_CHIPS))
    return shapes


# https://cloud.google.com/compute/docs/accelerator-optimized-machines#a4-vms
A4_SHAPE = Shape(NVIDIA_B200, "a4-highgpu-8g", None, 1, 8)

SHAPES: tuple[Shape, ...] = tuple(
    s for t in V6E_TOPOLOGIES for s in _v6e_shapes(t)
) + (A4_SHAPE,)


class CatalogError(ValueError):
    """A requested accelerator shape is not in the catalog; the message lists what is.

    `key` is the request's field at fault (accelerator, topology, machineType),
    `value` what was asked, `why` and `allowed` the rest of the message.
    """

    def __init__(self, key: str, value: object, why: str, allowed: object):
        self.key, self.value, self.why, self.allowed = key, value, why, str(allowed)
        super().__init__(f"{key} {value!r} {why}; allowed: {allowed}")


def accelerator(name: str) -> Accelerator:
    if name not in ACCELERATORS:
        raise CatalogError("accelerator", name, "is unknown", sorted(ACCELERATORS))
    return ACCELERATORS[name]


def shapes_of(accelerator_name: str) -> list[Shape]:
    return [s for s in SHAPES if s.accelerator.name == accelerator_name]


def default_machine_type(accelerator_name: str, topology: str | None) -> str:
    """The machine type a pool gets when the stack names none: the fewest VMs."""
    return min(_matching(accelerator_name, topology), key=lambda s: s.vms_per_slice).machine_type


def lookup(accelerator_name: str, topology: str | None, machine_type: str | None) -> Shape:
    """The one shape matching the request, or a CatalogError saying what is allowed."""
    candidates = _matching(accelerator_name, topology)
    if machine_type is None:
        machine_type = default_machine_type(accelerator_name, topology)
    for shape in candidates:
        if shape.machine_type == machine_type:
            return shape
    allowed = sorted({s.machine_type for s in candidates})
    raise CatalogError("machineType", machine_type, f"does not fit {accelerator_name} topology {topology!r}", allowed)


def _matching(accelerator_name: str, topology: str | None) -> list[Shape]:
    acc = accelerator(accelerator_name)
    shapes = shapes_of(acc.name)
    if acc.family is Family.GPU:
        if topology is not None:
            raise CatalogError("topology", topology, f"is not for {acc.name}, which takes none", "no topology")
        return shapes
    matching = [s for s in shapes if s.topology == topology]
    if not matching:
        allowed = sorted({s.topology for s in shapes}, key=topology_chips)
        raise CatalogError("topology", topology, f"is not a {acc.name} topology", allowed)
    return matching
