"""Which runs' slices are placed by JobSet's node-selector strategy, and what their node pools then carry."""

from __future__ import annotations

import pytest

from stack import placement
from stack.config import StackConfig
from stack.placement import NAMESPACED_JOB_LABEL, NO_SCHEDULE_TAINT, NODE_SELECTOR_STRATEGY_KEY
from tests.support.pulumi_harness import run_stack

BASE = {"project": "my-project-id", "region": "us-east5", "zones": ["us-east5-b"],
        "datasets": [{"name": "tinystories", "url": "https://example.com/stories.txt", "tokenize": "gemma3-270m"}]}
AT = placement.NODE_SELECTOR_MIN_SLICES
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
NODE_POOL = "gcp:container/nodePool:NodePool"


def pool(name: str = "ms", slices: int = AT, topology: str = "4x4") -> dict:
    return {"name": name, "accelerator": "tpu-v6e", "topology": topology, "slices": slices, "capacity": "spot"}


def run(name: str = "big", pool_name: str = "ms", **extra) -> dict:
    return {"name": name, "trainer": "gemma-jax", "pool": pool_name, "data": "tinystories", **extra}


def config(pools: list[dict], runs: list[dict], **changes) -> StackConfig:
    return StackConfig.from_mapping({**BASE, "pools": pools, "runs": runs,
                                     "images": {"gemma-jax": "r/gemma-jax@sha256:" + "1" * 64}, **changes})


def test_a_run_alone_on_a_pool_of_enough_slices_is_placed_by_node_selector():
    cfg = config([pool()], [run()])
    assert cfg.node_selector_runs() == {"big": ("ms",)}
    assert cfg.contracts()["ms"].node_selector_placement
    labels = cfg.node_pool_placement_labels()
    assert labels == {f"ms-s{i}": {NAMESPACED_JOB_LABEL: f"finetune_big-trainer-{i}"} for i in range(AT)}


@pytest.mark.parametrize("why, pools, runs", [
    ("fewer slices", [pool(slices=AT - 1)], [run()]),
    ("two runs share the pool", [pool()], [run(), run("other")]),
    ("a single-host shape", [{"name": "ms", "accelerator": "tpu-v6e", "topology": "1x1"}], [run()]),
    ("a label value over 63 characters", [pool()], [run("r" * 44)]),
])  # fmt: skip
def test_otherwise_pod_affinity_stays(why, pools, runs):
    cfg = config(pools, runs)
    assert cfg.node_selector_runs() == {}, why
    assert not any(c.node_selector_placement for c in cfg.contracts().values()), why
    assert cfg.node_pool_placement_labels() == {}, why


def test_a_ladder_is_placed_by_node_selector_only_if_every_rung_is_the_run_s_alone():
    pools = [pool("ms"), pool("ms-b")]
    alone = config(pools, [run(ladder=["ms-b"])])
    assert alone.node_selector_runs() == {"big": ("ms", "ms-b")}
    assert set(alone.node_pool_placement_labels()) == {f"{p}-s{i}" for p in ("ms", "ms-b") for i in range(AT)}
    shared = config(pools, [run(ladder=["ms-b"]), run("other", "ms-b")])
    assert shared.node_selector_runs() == {}


def test_the_label_names_the_stack_s_namespace():
    cfg = config([pool()], [run()], namespace="team-a")
    assert cfg.node_pool_placement_labels()["ms-s0"] == {NAMESPACED_JOB_LABEL: "team-a_big-trainer-0"}


def test_the_program_declares_the_labels_taints_and_annotation():
    overrides = {"gke-finetune:pools": [{**pool("v6e-2x4", topology="2x4"), "machineType": "ct6e-standard-4t"}],
                 "gke-finetune:runs": [run("big", "v6e-2x4")]}
    deployment = run_stack("tpu-multislice", overrides=overrides)
    [jobset] = deployment.of_type(JOBSET)
    assert jobset.inputs["metadata"]["annotations"][NODE_SELECTOR_STRATEGY_KEY] == "true"
    node_pools = {p.inputs["name"]: p.inputs["nodeConfig"] for p in deployment.of_type(NODE_POOL)
                  if p.inputs["name"].startswith("v6e-2x4")}
    assert len(node_pools) == AT
    for i in range(AT):
        node = node_pools[f"v6e-2x4-s{i}"]
        assert node["labels"][NAMESPACED_JOB_LABEL] == f"finetune_big-trainer-{i}"
        assert {"key": NO_SCHEDULE_TAINT.key, "value": "true", "effect": "NO_SCHEDULE"} in node["taints"]


def test_the_shipped_multislice_stack_keeps_pod_affinity():
    deployment = run_stack("tpu-multislice")
    [jobset] = deployment.of_type(JOBSET)
    assert NODE_SELECTOR_STRATEGY_KEY not in jobset.inputs["metadata"]["annotations"]
    assert "alpha.jobset.sigs.k8s.io/exclusive-topology" in jobset.inputs["metadata"]["annotations"]
    assert not any(NAMESPACED_JOB_LABEL in (p.inputs["nodeConfig"].get("labels") or {})
                   for p in deployment.of_type(NODE_POOL))
