"""An Autopilot stack's nodes: what Autopilot would create for the stack's pods, before they come.

Autopilot has no node pools to declare; GKE creates nodes for the pods that
need them (https://cloud.google.com/kubernetes-engine/docs/concepts/autopilot-overview):
- for a pod selecting a custom ComputeClass, nodes of the class's first
  priority rule, labelled `cloud.google.com/compute-class: <class>`
  (https://cloud.google.com/kubernetes-engine/docs/concepts/about-custom-compute-classes);
- for a pod selecting accelerator labels, nodes of the catalog shape those
  labels and its chip count name (admission/nodes.py `autopilot_shape`, the
  same reading the policy pack makes);
- general-purpose nodes for the rest (the staging Jobs, the controllers).
Each becomes the wire inputs of an equivalent node pool, so nodes.py gives
them GKE's labels, taints, capacity and allocatable (the default 100 GB boot
disk: Autopilot sizes none). The ComputeClass objects themselves are GKE's
own API (no module publishes its CRD), so the control plane can't take them.
"""

from __future__ import annotations

from collections.abc import Mapping

from admission.nodes import autopilot_shape, pod_chips
from core import catalog
from core.catalog import COMPUTE_CLASS_LABEL
from core.machines import GKE_DEFAULT_BOOT_DISK_GB

GENERAL_MACHINE = "e2-standard-4"
GENERAL_NODES = 2


def _inputs(name: str, shape: catalog.Shape, spot: bool, labels: dict[str, str]) -> dict:
    node = {"machineType": shape.machine_type, "spot": spot, "labels": labels, "diskSizeGb": GKE_DEFAULT_BOOT_DISK_GB}
    if shape.family is catalog.Family.GPU:
        node["guestAccelerators"] = [{"type": shape.accelerator.gke_accelerator, "count": shape.chips_per_vm}]
    inputs = {"name": name, "nodeConfig": node, "nodeCount": shape.vms_per_slice}
    if shape.multi_host:
        inputs["placementPolicy"] = {"type": "COMPACT", "tpuTopology": shape.topology}
    return inputs


def _class_shape(rule: Mapping) -> catalog.Shape | None:
    accelerator = rule.get("tpu") or rule.get("gpu") or {}
    for shape in catalog.SHAPES:
        if shape.accelerator.gke_accelerator == accelerator.get("type") and shape.chips_per_vm == accelerator.get(
                "count") and (shape.topology or None) == accelerator.get("topology"):
            return shape
    return None


def autopilot_node_pools(objects) -> list[dict]:
    """Node-pool wire inputs standing for the nodes Autopilot would create for the stack's pods."""
    pools = [{"name": "nap-general", "nodeConfig": {"machineType": GENERAL_MACHINE}, "nodeCount": GENERAL_NODES}]
    for cc in objects.manifests("ComputeClass"):
        rule = cc["spec"]["priorities"][0]
        shape = _class_shape(rule)
        if shape is None:
            raise ValueError(f"e2e: ComputeClass {cc['metadata']['name']} priorities[0] {rule} is no catalog shape")
        pools.append(_inputs(f"nap-{cc['metadata']['name']}"[:40], shape, bool(rule.get("spot")),
                             {COMPUTE_CLASS_LABEL: cc["metadata"]["name"]}))
    for jobset in objects.manifests("JobSet"):
        pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
        selector = pod["spec"].get("nodeSelector") or {}
        if COMPUTE_CLASS_LABEL in selector:
            continue
        shape = autopilot_shape(selector, pod_chips(pod))
        if shape is not None:
            spot = selector.get(catalog.SPOT_LABEL) == "true"
            pools.append(_inputs(f"nap-{jobset['metadata']['name']}"[:40], shape, spot, {}))
    return pools
