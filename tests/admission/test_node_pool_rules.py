"""GKE's node pool rules over the pools the program declares: each shipped pool passes, each rule fires."""

import copy
import functools

import pytest

from admission.node_pools import node_pool_findings
from tests.support.pulumi_harness import SHIPPED_STACKS, run_stack

NODE_POOL = "gcp:container/nodePool:NodePool"


@functools.cache
def pools(stack):
    return {r.inputs["name"]: r.inputs for r in run_stack(stack).of_type(NODE_POOL)}


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_every_declared_pool_passes(stack):
    assert {name: node_pool_findings(p) for name, p in pools(stack).items() if node_pool_findings(p)} == {}


def test_the_declared_pools_have_sized_hyperdisk_boot_disks():
    for stack in ("dev", "tpu-multihost", "a4"):
        for name, p in pools(stack).items():
            if name != "system":
                assert p["nodeConfig"]["diskType"] == "hyperdisk-balanced"
                assert p["nodeConfig"]["diskSizeGb"] == 200


def multihost():
    return copy.deepcopy(pools("tpu-multihost")["v6e-2x4"])


def bad(change, base=multihost):
    inputs = base()
    change(inputs)
    return node_pool_findings(inputs)


@pytest.mark.parametrize("change, where, needle", [
    # What multi-host pools used to declare: total bounds, BALANCED.
    (lambda p: p.update(autoscaling={"totalMinNodeCount": 0, "totalMaxNodeCount": 2, "locationPolicy": "BALANCED"}),
     "autoscaling", "total node counts"),
    (lambda p: p["autoscaling"].update(maxNodeCount=3), "autoscaling.maxNodeCount", "2 VMs"),
    (lambda p: p["autoscaling"].update(minNodeCount=1), "autoscaling.minNodeCount", "neither 0 nor"),
    (lambda p: p["autoscaling"].update(locationPolicy="BALANCED"), "autoscaling.locationPolicy", "ANY"),
    (lambda p: p.update(nodeLocations=["us-east5-a", "us-east5-b"]), "nodeLocations", "one"),
    (lambda p: p.update(placementPolicy={"type": "COMPACT", "tpuTopology": "4x4"}), "autoscaling.maxNodeCount", "4 VMs"),
])  # fmt: skip
def test_multi_host_rules_fire(change, where, needle):
    found = [f for f in bad(change) if f.where == where]
    assert found and needle in found[0].why and found[0].source.startswith("https://cloud.google.com/")


def test_a_topology_on_a_single_host_or_gpu_pool_is_refused():
    [single] = bad(lambda p: p.update(placementPolicy={"type": "COMPACT", "tpuTopology": "1x1"}),
                   lambda: copy.deepcopy(pools("dev")["v6e-1x1"]))
    assert "only for multi-host" in single.why
    [gpu] = bad(lambda p: p.update(placementPolicy={"type": "COMPACT", "tpuTopology": "2x4"}),
                lambda: copy.deepcopy(pools("a4")["a4"]))
    assert "not a TPU machine" in gpu.why


@pytest.mark.parametrize("change, needle", [
    (lambda p: p["nodeConfig"].update(spot=True), "consumes a reservation on a spot pool"),
    (lambda p: p["nodeConfig"].update(spot=True, flexStart=True, reservationAffinity={}), "one at a time"),
    (lambda p: p["nodeConfig"].update(flexStart=True, reservationAffinity={}), "provisioning request"),
    (lambda p: p.update(queuedProvisioning={"enabled": True}) or p["nodeConfig"].update(spot=True), "one at a time"),
])  # fmt: skip
def test_capacity_combinations_gke_refuses(change, needle):
    found = bad(change, lambda: copy.deepcopy(pools("a4")["a4"]))
    assert any(needle in f.why for f in found), found


def test_a_queued_pool_is_declared_flex_start_and_labels_its_nodes_queued():
    """GKE taints queued nodes but does not label them; the pods and Kueue's flavor select the label."""
    pool = pools("tpu-queued")["queued-v6e-2x4"]
    assert pool["queuedProvisioning"] == {"enabled": True}
    assert pool["nodeConfig"]["flexStart"] is True
    assert pool["nodeConfig"]["labels"]["cloud.google.com/gke-queued"] == "true"
    assert pools("tpu-queued")["spot-v6e-2x4"]["nodeConfig"]["labels"].get("cloud.google.com/gke-queued") is None
    [found] = bad(lambda p: p["nodeConfig"].update(flexStart=False), lambda: copy.deepcopy(pool))
    assert "flex-start VMs" in found.why
