"""The GKE-shaped nodes come from the node pools' declarations, not from the runs."""

from __future__ import annotations

from core.allocatable import node_allocatable
from core.catalog import NODEPOOL_LABEL, QUEUED_LABEL, SPOT_LABEL, TPU_TOPOLOGY_LABEL
from core.machines import MACHINES
from e2e.harness.nodes import stack_nodes
from e2e.harness.stack_objects import stack_objects


def _pools(stack: str) -> dict:
    objects = stack_objects(stack)
    return {p.pool: p for p in stack_nodes(objects.node_pools, objects.cluster, objects.region)}


def test_a_multislice_stack_gets_one_node_per_vm_of_each_slice_pool():
    pools = _pools("tpu-multislice")
    slices = {name: p for name, p in pools.items() if name != "system"}
    assert len(slices) == 2
    for name, pool in slices.items():
        assert len(pool.nodes) == 2  # a 2x4 slice of ct6e-standard-4t is 2 VMs
        for node in pool.nodes:
            labels = node["metadata"]["labels"]
            assert labels[NODEPOOL_LABEL] == name
            assert labels[TPU_TOPOLOGY_LABEL] == "2x4"
            assert labels[SPOT_LABEL] == "true"
            taints = {(t["key"], t["effect"]) for t in node["spec"]["taints"]}
            assert ("google.com/tpu", "NoSchedule") in taints
            assert node["status"]["allocatable"]["google.com/tpu"] == "4"


def test_allocatable_is_core_allocatable_of_the_pool_machine():
    a4 = _pools("a4")["a4"].nodes[0]
    expected = node_allocatable(MACHINES["a4-highgpu-8g"], 200, True)
    assert a4["status"]["allocatable"]["memory"] == f"{int(expected.memory // 2**20)}Mi"
    assert a4["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert a4["status"]["capacity"]["ephemeral-storage"] == "12000Gi"  # 32 local SSDs of 375 GiB


def test_queued_nodes_get_gke_taint_and_only_the_labels_the_pool_declares():
    objects = stack_objects("tpu-queued")
    inputs = next(p for p in objects.node_pools if (p.get("queuedProvisioning") or {}).get("enabled"))
    pool = next(p for p in stack_nodes([inputs], objects.cluster, objects.region))
    assert pool.queued
    node = pool.nodes[0]
    assert {"key": QUEUED_LABEL, "value": "true", "effect": "NoSchedule"} in node["spec"]["taints"]
    declared = (inputs["nodeConfig"].get("labels") or {})
    assert (QUEUED_LABEL in node["metadata"]["labels"]) == (QUEUED_LABEL in declared)
