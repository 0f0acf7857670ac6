"""Every Kueue object the stacks generate: valid against the Kueue v0.19.2 CRD schemas (strict), and true to the pools."""

from __future__ import annotations

import copy

import pytest

from core.catalog import QUEUED_LABEL, QUEUED_TAINT
from core.names import LOCAL_QUEUE, RUNS_NAMESPACE, WORKLOAD_PRIORITIES
from manifests import kueue
from manifests.controllers import kueue_manager_config
from stack import reader
from tests.support import schemas
from tools import render

KUEUE_STACKS = [s for s in render.shipped_stacks() if render.stack_kueue_manifests(s)]
CASES = [
    pytest.param(stack, key, manifest, id=f"{stack}/{key}")
    for stack in KUEUE_STACKS
    for key, manifest in render.stack_kueue_manifests(stack).items()
]


def test_a_shipped_stack_installs_kueue():
    assert "tpu-queued" in KUEUE_STACKS


@pytest.mark.parametrize("stack,key,manifest", CASES)
def test_every_kueue_object_is_schema_valid(stack, key, manifest):
    assert schemas.kueue_errors(manifest) == []


def _objects(stack: str = "tpu-queued") -> dict[str, dict]:
    return render.stack_kueue_manifests(stack)


def _typo(manifest: dict, path: tuple, wrong: str) -> dict:
    broken = copy.deepcopy(manifest)
    node = broken
    for key in path[:-1]:
        node = node[key]
    node[wrong] = node.pop(path[-1])
    return broken


@pytest.mark.parametrize("key,path,wrong", [
    ("resourceflavor-finetune-queued-v6e-2x4-1e7dde", ("spec", "nodeLabels"), "nodeLabel"),
    ("resourceflavor-finetune-queued-v6e-2x4-1e7dde", ("spec", "tolerations", 0, "effect"), "efect"),
    ("clusterqueue-finetune", ("spec", "resourceGroups", 0, "flavors", 0, "resources", 0, "nominalQuota"), "nominalquota"),
    ("clusterqueue-finetune", ("spec", "admissionChecksStrategy"), "admissionChecks"),  # v1beta1's field
    ("clusterqueue-finetune", ("spec", "flavorFungibility", "whenCanPreempt"), "whenCanPrempt"),
    ("localqueue-finetune", ("spec", "clusterQueue"), "clusterqueue"),
    ("admissioncheck-finetune-queued-v6e-2x4-provisioning-3c2d5e", ("spec", "controllerName"), "controller"),
    ("provisioningrequestconfig-finetune-queued-v6e-2x4-provisioning-3c2d5e", ("spec", "managedResources"), "managedResource"),
    ("provisioningrequestconfig-finetune-queued-v6e-2x4-provisioning-3c2d5e", ("spec", "podSetUpdates", "nodeSelector", 0, "key"), "name"),
    ("workloadpriorityclass-finetune-high", ("value",), "priority"),
    ("workloadpriorityclass-finetune-high", ("metadata", "name"), "nam"),
])  # fmt: skip
def test_a_typo_in_a_kueue_object_fails(key, path, wrong):
    errors = schemas.kueue_errors(_typo(_objects()[key], path, wrong))
    assert any(f"'{wrong}' was unexpected" in e for e in errors), errors


def test_a_value_outside_the_schema_fails():
    queue = copy.deepcopy(_objects()["clusterqueue-finetune"])
    queue["spec"]["queueingStrategy"] = "FIFO"
    assert any("is not one of" in e for e in schemas.kueue_errors(queue))
    assert schemas.kueue_errors({**queue, "kind": "Cohort"}) != []


def _config(stack: str = "tpu-queued"):
    return reader.load_files(stack, render.ROOT)


def test_the_cluster_queue_holds_every_flavor_in_ladder_order_with_the_pools_quotas():
    config = _config()
    spec = _objects()["clusterqueue-finetune"]["spec"]
    [group] = spec["resourceGroups"]
    assert [f["name"] for f in group["flavors"]] == ["finetune-spot-v6e-2x4-e74a62", "finetune-v6e-2x4-60293a", "finetune-queued-v6e-2x4-1e7dde"]
    assert group["coveredResources"] == ["cpu", "memory", "ephemeral-storage", "google.com/tpu"]
    contracts = config.contracts()
    for flavor in group["flavors"]:
        # The CRD's CEL rule: as many resources as coveredResources, here in the same order.
        assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]
        chips = {r["name"]: r["nominalQuota"] for r in flavor["resources"]}["google.com/tpu"]
        [contract] = [c for c in contracts.values() if c.flavor == flavor["name"]]
        assert chips == str(contract.total_chips) == "8"
        # Quantities as strings, as Kueue stores them: a number would be a diff on every preview.
        assert all(isinstance(r["nominalQuota"], str) for r in flavor["resources"]), flavor
    assert spec["preemption"]["withinClusterQueue"] == "LowerPriority"
    assert spec["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": RUNS_NAMESPACE}}
    assert spec["admissionChecksStrategy"] == {
        "admissionChecks": [{"name": "finetune-queued-v6e-2x4-provisioning-3c2d5e", "onFlavors": ["finetune-queued-v6e-2x4-1e7dde"]}]
    }
    # The stack's own cluster's default namespace names its ClusterQueue.
    assert _objects()["clusterqueue-finetune"]["metadata"] == {"name": RUNS_NAMESPACE}
    assert _objects()["localqueue-finetune"]["spec"] == {"clusterQueue": RUNS_NAMESPACE}
    assert _objects()["localqueue-finetune"]["metadata"] == {"name": LOCAL_QUEUE, "namespace": RUNS_NAMESPACE}


def test_a_queued_pool_is_provisioned_by_kueues_provisioning_request_check():
    objects = _objects()
    config = objects["provisioningrequestconfig-finetune-queued-v6e-2x4-provisioning-3c2d5e"]["spec"]
    assert config["provisioningClassName"] == "queued-provisioning.gke.io"
    assert config["managedResources"] == ["google.com/tpu"]
    assert config["parameters"] == {"maxRunDurationSeconds": "86400"}  # Pulumi.tpu-queued.yaml
    check = objects["admissioncheck-finetune-queued-v6e-2x4-provisioning-3c2d5e"]["spec"]
    assert check["controllerName"] == "kueue.x-k8s.io/provisioning-request"
    assert check["parameters"]["name"] == "finetune-queued-v6e-2x4-provisioning-3c2d5e"
    flavor = objects["resourceflavor-finetune-queued-v6e-2x4-1e7dde"]["spec"]
    assert flavor["nodeLabels"][QUEUED_LABEL] == "true"
    assert QUEUED_TAINT.toleration() in flavor["tolerations"]
    # Only queued pools get a check.
    assert not [k for k in objects if k.startswith("admissioncheck-") and "spot" in k]


def test_every_flavor_is_the_rest_of_its_pools_contract():
    config = _config()
    contracts = config.contracts()
    for key, manifest in _objects().items():
        if manifest["kind"] == "ResourceFlavor":
            [contract] = [c for c in contracts.values() if c.flavor == manifest["metadata"]["name"]]
            assert manifest["spec"]["nodeLabels"] == contract.flavor_node_labels
            assert manifest["spec"].get("tolerations", []) == list(contract.flavor_tolerations)


def test_every_priority_class_runs_may_name():
    classes = {m["metadata"]["name"]: m["value"] for m in _objects().values() if m["kind"] == "WorkloadPriorityClass"}
    assert classes == {f"{RUNS_NAMESPACE}-{name}": value for name, value in WORKLOAD_PRIORITIES.items()}


def test_no_flavors_no_objects():
    assert kueue.kueue_manifests([]) == {}


def test_a_quota_is_written_as_the_api_server_writes_it_back():
    """The A4 pool's memory is a whole number of GiB: `10956800Mi` would be stored as `10700Gi`, and every
    preview would show an update of the ClusterQueue (e2e/tests/test_handoff.py showed it)."""
    from core import quantity
    from manifests.kueue import quota
    from stack import reader
    from tools.offline import ROOT

    [contract] = reader.load_files("a4", ROOT).contracts().values()
    for resource in ("cpu", "memory", "ephemeral-storage"):
        written = quota(contract, resource)
        value = quantity.parse(written)
        canonical = (quantity.canonical_millis(int(value * 1000)) if resource == "cpu"
                     else quantity.canonical_bytes(int(value)))
        assert written == canonical and "." not in written, (resource, written)


def test_no_queue_or_kueue_configuration_uses_the_alpha_concurrent_admission():
    """docs/capacity.md "After an eviction": with Kueue 0.19.2's ConcurrentAdmission, a pods-ready eviction
    readmits the run on the same rung at once (e2e-measured), so neither its policy nor its gate is set."""
    queues = [m for _, _, m in (c.values for c in CASES) if m["kind"] == "ClusterQueue"]
    assert queues, "the shipped stacks declare ClusterQueues"
    assert [q["metadata"]["name"] for q in queues if "concurrentAdmissionPolicy" in q["spec"]] == []
    assert "ConcurrentAdmission" not in (kueue_manager_config(RUNS_NAMESPACE).get("featureGates") or {})
