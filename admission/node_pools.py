"""GKE's rules for a node pool, over the inputs the provider receives (wire form, camelCase).

The program's NodePools component must declare pools GKE creates; these
rules say what GKE refuses, for the offline plan, the tests and the policy
pack, which all see the same declared inputs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from admission.findings import Finding
from core import catalog

TPU_SOURCE = "https://cloud.google.com/kubernetes-engine/docs/how-to/tpus#node-pool"
AUTOSCALING_SOURCE = "https://cloud.google.com/kubernetes-engine/docs/concepts/tpus#autoscaling"
CAPACITY_SOURCE = "https://cloud.google.com/kubernetes-engine/docs/concepts/consumption-options"
DWS_SOURCE = "https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest"


def node_pool_findings(inputs: Mapping) -> list[Finding]:
    """Every rule a declared google node pool breaks; empty when GKE would create it."""
    node = inputs.get("nodeConfig") or {}
    machine = node.get("machineType", "")
    topology = (inputs.get("placementPolicy") or {}).get("tpuTopology")
    shape = _shape(machine, topology)
    found = list(_placement(inputs, shape))
    if shape is not None and shape.multi_host:
        found += _multi_host_autoscaling(inputs, shape)
    found += _capacity(inputs)
    return found


def _shape(machine: str, topology: str | None) -> catalog.Shape | None:
    """The catalog shape of a machine and slice topology, or None for machines the catalog doesn't hold."""
    matches = [s for s in catalog.SHAPES if s.machine_type == machine and (s.topology == topology or not s.topology)]
    if not matches:
        return None
    return next((s for s in matches if s.topology == topology), matches[0])


def _placement(inputs: Mapping, shape: catalog.Shape | None) -> Iterator[Finding]:
    policy = inputs.get("placementPolicy")
    is_tpu = shape is not None and shape.family is catalog.Family.TPU
    if policy and policy.get("tpuTopology") and not is_tpu:
        yield Finding("node-pool", "placementPolicy.tpuTopology", policy["tpuTopology"],
                      f"is set on a pool of {inputs.get('nodeConfig', {}).get('machineType')!r}, not a TPU machine",
                      TPU_SOURCE)
    if is_tpu and shape.multi_host and not (policy and policy.get("type") == "COMPACT" and policy.get("tpuTopology")):
        yield Finding("node-pool", "placementPolicy", policy,
                      f"is not COMPACT with the topology, which a multi-host {shape.topology} slice needs", TPU_SOURCE)
    if is_tpu and not shape.multi_host and policy and policy.get("tpuTopology"):
        yield Finding("node-pool", "placementPolicy.tpuTopology", policy["tpuTopology"],
                      f"is set on single-host {shape.machine_type}: a topology is only for multi-host slices",
                      TPU_SOURCE)


def _multi_host_autoscaling(inputs: Mapping, shape: catalog.Shape) -> Iterator[Finding]:
    """A multi-host slice is created and removed whole, and sized against the per-zone bounds."""
    scaling = inputs.get("autoscaling")
    if not scaling:
        return
    if "totalMinNodeCount" in scaling or "totalMaxNodeCount" in scaling:
        yield Finding("node-pool", "autoscaling", scaling,
                      "uses total node counts; GKE validates a multi-host slice against the per-zone "
                      "maxNodeCount (then 0: 'not a valid size of TPU pod slice')", AUTOSCALING_SOURCE)
    top = scaling.get("maxNodeCount")
    if top is not None and top != shape.vms_per_slice:
        yield Finding("node-pool", "autoscaling.maxNodeCount", top,
                      f"is not the {shape.vms_per_slice} VMs of a {shape.topology} slice", AUTOSCALING_SOURCE)
    if scaling.get("minNodeCount") not in (None, 0, shape.vms_per_slice):
        yield Finding("node-pool", "autoscaling.minNodeCount", scaling.get("minNodeCount"),
                      f"is neither 0 nor the slice's {shape.vms_per_slice} VMs", AUTOSCALING_SOURCE)
    if scaling.get("locationPolicy") not in (None, "ANY"):
        yield Finding("node-pool", "autoscaling.locationPolicy", scaling.get("locationPolicy"),
                      "balances a slice that lives in one zone; a multi-host slice takes ANY", AUTOSCALING_SOURCE)
    zones = inputs.get("nodeLocations") or []
    if len(zones) > 1:
        yield Finding("node-pool", "nodeLocations", zones, "spread a multi-host slice over zones; it needs one",
                      TPU_SOURCE)


def _capacity(inputs: Mapping) -> Iterator[Finding]:
    node = inputs.get("nodeConfig") or {}
    affinity = (node.get("reservationAffinity") or {}).get("consumeReservationType")
    spot, flex = bool(node.get("spot")), bool(node.get("flexStart"))
    queued = bool((inputs.get("queuedProvisioning") or {}).get("enabled"))
    # Queued provisioning is a mode of flex-start (GKE creates such pools with
    # --enable-queued-provisioning and --flex-start), so those two go together;
    # spot combines with neither.
    chosen = [name for name, on in (("spot", spot), ("flexStart", flex or queued)) if on]
    if len(chosen) > 1:
        yield Finding("node-pool", "nodeConfig", chosen, "combine capacity options GKE offers one at a time",
                      CAPACITY_SOURCE)
    if queued and not flex:
        yield Finding("node-pool", "nodeConfig.flexStart", node.get("flexStart"),
                      "is off on a queued-provisioning pool, whose nodes are flex-start VMs", DWS_SOURCE)
    if chosen and affinity == "SPECIFIC_RESERVATION":
        yield Finding("node-pool", "nodeConfig.reservationAffinity", affinity,
                      f"consumes a reservation on a {chosen[0]} pool, which can't", CAPACITY_SOURCE)
    if (flex or queued) and (inputs.get("management") or {}).get("autoRepair"):
        yield Finding("node-pool", "management.autoRepair", True,
                      "would repair nodes that a provisioning request holds and releases", DWS_SOURCE)
