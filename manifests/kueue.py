"""The stack's Kueue objects (kueue.x-k8s.io/v1beta2, Kueue v0.19.2) as plain dicts, from the pools' contracts.

- A ResourceFlavor per pool Kueue admits runs to: the node labels and
  tolerations of the pool's contract that a queued run's pods do not carry
  themselves (its pool label, capacity label and tolerations); Kueue adds
  them to the pods of the run it admits on that flavor
  (pkg/podset/podset.go, FromAssignment).
- One ClusterQueue: every flavor in the order Kueue tries them (a run's
  capacity ladder), each with the chips, CPU, memory and ephemeral storage
  of its pool at full size as quota; a run that fits no earlier flavor's
  quota goes to the next one (flavorFungibility), and a higher priority
  preempts a lower one (preemption.withinClusterQueue: LowerPriority).
  https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/
- A LocalQueue in the runs' namespace.
- For each queued pool, a ProvisioningRequestConfig (class
  `queued-provisioning.gke.io`, the pool's accelerator as managed resource,
  its `maxRunDurationSeconds`) and the AdmissionCheck of Kueue's
  provisioning controller that uses it, on that pool's flavor only: Kueue
  creates the ProvisioningRequest GKE needs to create the whole slice, and
  admits the run once it is provisioned.
  https://kueue.sigs.k8s.io/docs/concepts/admission_check/provisioning_request/
  https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest
- The WorkloadPriorityClasses runs name with `priority`.
  https://kueue.sigs.k8s.io/docs/concepts/workload_priority_class/
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from core.catalog import ACCELERATORS, PROVISIONING_REQUEST_LABEL
from core.contract import SchedulingContract
from core.names import (
    LOCAL_QUEUE, WORKLOAD_PRIORITIES, cluster_scoped, cohort_name, legacy_cluster_scoped, priority_class_name,
)
from core import quantity
from core.quantity import GIB

API_GROUP = "kueue.x-k8s.io"
API_VERSION = f"{API_GROUP}/v1beta2"
# The labels of a workload Kueue admits: its LocalQueue and its priority class.
# https://kueue.sigs.k8s.io/docs/tasks/run/jobsets/
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
QUEUED_PROVISIONING_CLASS = "queued-provisioning.gke.io"
# Resources a run's pods request besides chips; Kueue refuses a workload that
# requests a resource its ClusterQueue does not cover ("resource ... unavailable
# in ClusterQueue", pkg/scheduler/flavorassigner/flavorassigner.go).
NODE_RESOURCES = ("cpu", "memory", "ephemeral-storage")
_MIB = GIB / 1024


def _object(kind: str, name: str, spec: dict, namespace: str | None = None) -> dict:
    meta = {"name": name} if namespace is None else {"name": name, "namespace": namespace}
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": meta, "spec": spec}


def check_name(contract: SchedulingContract) -> str:
    """The AdmissionCheck (and ProvisioningRequestConfig) of a queued pool (cluster-scoped)."""
    return cluster_scoped(contract.namespace, f"{contract.pool}-provisioning")


def renamed_from(flavors: Sequence[SchedulingContract]) -> dict[str, str]:
    """The objects whose names `cluster_scoped`'s hash changed, new manifest key -> the key the stack
    declared them under before (`legacy_cluster_scoped`): the Pulumi aliases that make a preview show each as
    the same object renamed (a replacement: a cluster-scoped object's name is its identity)."""
    renamed = {}
    for contract in flavors:
        if contract.flavor == cluster_scoped(contract.namespace, contract.pool):
            renamed[f"resourceflavor-{contract.flavor}"] = \
                f"resourceflavor-{legacy_cluster_scoped(contract.namespace, contract.pool)}"
        if contract.queued:
            old = legacy_cluster_scoped(contract.namespace, f"{contract.pool}-provisioning")
            for kind in ("provisioningrequestconfig", "admissioncheck"):
                renamed[f"{kind}-{check_name(contract)}"] = f"{kind}-{old}"
    return renamed


def cluster_queue_name(namespace: str) -> str:
    """The stack's one ClusterQueue (cluster-scoped): named after the stack's namespace."""
    return cluster_scoped(namespace)


def resource_flavor(contract: SchedulingContract) -> dict:
    spec: dict = {"nodeLabels": contract.flavor_node_labels}
    if contract.flavor_tolerations:
        spec["tolerations"] = [dict(t) for t in contract.flavor_tolerations]
    return _object("ResourceFlavor", contract.flavor, spec)


def provisioning_request_config(contract: SchedulingContract) -> dict:
    """What Kueue asks GKE for a queued pool: the whole slice, for at most the pool's run duration.

    `maxRunDurationSeconds` is a ProvisioningRequest parameter GKE reads
    (its default and maximum: 7 days); `podSetUpdates` pins the run's pods
    to the nodes provisioned for its request, as xpk does
    (src/xpk/templates/kueue_config.yaml.j2).
    """
    return _object("ProvisioningRequestConfig", check_name(contract), {
        "provisioningClassName": QUEUED_PROVISIONING_CLASS,
        "managedResources": [contract.resource_name],
        "parameters": {"maxRunDurationSeconds": str(contract.max_run_duration_seconds)},
        "podSetUpdates": {"nodeSelector": [
            {"key": PROVISIONING_REQUEST_LABEL, "valueFromProvisioningClassDetail": "ResizeRequestName"},
        ]},
    })


def admission_check(contract: SchedulingContract) -> dict:
    return _object("AdmissionCheck", check_name(contract), {
        "controllerName": PROVISIONING_CONTROLLER,
        "parameters": {"apiGroup": API_GROUP, "kind": "ProvisioningRequestConfig", "name": check_name(contract)},
    })


def covered_resources(flavors: Sequence[SchedulingContract]) -> list[str]:
    """Node resources, then every accelerator resource of the catalog that a flavor has."""
    chips = sorted({a.resource_name for a in ACCELERATORS.values()} & {c.resource_name for c in flavors})
    return [*NODE_RESOURCES, *chips]


def quota(contract: SchedulingContract, resource: str) -> str:
    """What the stack's flavor holds of `resource`: the pool's chips or its nodes' allocatable, at full size,
    or this stack's share of them where other stacks' ClusterQueues share the pool (stack/sharing.py).

    Always a quantity string in the form the API server writes back: Kueue's webhook stores a quota
    as a `resource.Quantity`, which serialises canonically (a number, or `10956800Mi` where it keeps
    `10700Gi`), so any other form would differ from the stored object on every `pulumi preview` (a
    perpetual update the real engine showed, e2e/tests/test_engine.py and e2e/tests/test_handoff.py)."""
    return _amount(contract, resource, contract.nominal_vms)


def _amount(contract: SchedulingContract, resource: str, vms: int) -> str:
    """`vms` of the pool's nodes as a quota of `resource` (their chips, or their allocatable)."""
    if resource not in NODE_RESOURCES:
        return str(vms * contract.chips_per_host if resource == contract.resource_name else 0)
    per_node = contract.allocatable.get(resource)
    if resource == "cpu":
        return quantity.canonical_millis(int(per_node * 1000) * vms)
    return quantity.canonical_bytes(int(per_node // _MIB) * vms * int(_MIB))


def _flavor_quotas(contract: SchedulingContract, covered: Sequence[str]) -> dict:
    """A flavor's entry in the ClusterQueue: its nominal quota of each resource, and on a shared pool its
    borrowing and lending limits in the cohort (chips, and the node resources in proportion)."""
    resources = []
    for r in covered:
        entry = {"name": r, "nominalQuota": quota(contract, r)}
        for key, chips in (("borrowingLimit", contract.borrow_chips), ("lendingLimit", contract.lend_chips)):
            if contract.shared and chips is not None:
                entry[key] = _amount(contract, r, chips // contract.chips_per_host)
        resources.append(entry)
    return {"name": contract.flavor, "resources": resources}


def cohort(flavors: Sequence[SchedulingContract]) -> str | None:
    """The cohort of a stack whose queue has a shared pool's flavor (core/names.py `cohort_name`); else none."""
    shared = [c.flavor for c in flavors if c.shared]
    return cohort_name(shared) if shared else None


def cluster_queue(flavors: Sequence[SchedulingContract], namespace: str) -> dict:
    covered = covered_resources(flavors)
    spec: dict = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "queueingStrategy": "BestEffortFIFO",
        # Kueue's defaults, declared: try the next flavor before preempting in this one.
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Never"},
        "resourceGroups": [{"coveredResources": covered, "flavors": [_flavor_quotas(c, covered) for c in flavors]}],
    }
    shared = cohort(flavors)
    if shared:
        spec["cohortName"] = shared
        # A rung within the stack's own quota before another team's idle quota, which it may have to give back;
        # and what the stack lent, it takes back by preempting the borrower (its run checkpoints and is requeued).
        # https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/#flavorfungibility (whenCanBorrow: TryNextFlavor
        # tries the next flavor rather than borrow in this one) and #reclaimwithincohort (Any: preempt any
        # workload of the cohort that uses this queue's nominal quota); Kueue v0.19.2
        # apis/kueue/v1beta2/clusterqueue_types.go FlavorFungibility, ClusterQueuePreemption.
        spec["flavorFungibility"]["whenCanBorrow"] = "TryNextFlavor"
        spec["preemption"]["reclaimWithinCohort"] = "Any"
    checks = [{"name": check_name(c), "onFlavors": [c.flavor]} for c in flavors if c.queued]
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": checks}
    return _object("ClusterQueue", cluster_queue_name(namespace), spec)


def local_queue(namespace: str) -> dict:
    return _object("LocalQueue", LOCAL_QUEUE, {"clusterQueue": cluster_queue_name(namespace)}, namespace)


def workload_priority_class(namespace: str, priority: str, value: int) -> dict:
    return {
        "apiVersion": API_VERSION,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": priority_class_name(namespace, priority)},
        "value": value,
        "description": f"gke-finetune runs in namespace {namespace} with `priority: {priority}`; "
                       "a higher value preempts a lower one",
    }


def manifest_key(manifest: Mapping) -> str:
    """`<kind>-<name>`, lower case: the object's file name in the plan and the goldens."""
    return f"{manifest['kind'].lower()}-{manifest['metadata']['name']}"


def kueue_manifests(flavors: Sequence[SchedulingContract]) -> dict[str, dict]:
    """Every Kueue object of a stack whose flavors, in order, are `flavors` (their contracts name the stack's
    namespace); none without flavors."""
    if not flavors:
        return {}
    namespace = flavors[0].namespace
    objects = [resource_flavor(c) for c in flavors]
    for contract in (c for c in flavors if c.queued):
        objects += [provisioning_request_config(contract), admission_check(contract)]
    objects += [cluster_queue(flavors, namespace), local_queue(namespace)]
    objects += [workload_priority_class(namespace, n, v) for n, v in WORKLOAD_PRIORITIES.items()]
    return {manifest_key(m): m for m in objects}
