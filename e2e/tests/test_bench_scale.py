"""The scale benchmark's pieces that decide what it measures: the stacks it declares, JobSet's node-selector
strategy given to them, the exclusive-placement verdict and the growth figures (bench/scale*.py)."""

from __future__ import annotations

from bench.scale_placement import NAMESPACED_JOB_LABEL, NODE_SELECTOR_STRATEGY_KEY, node_selector_strategy
from bench.scale_run import POOL, RUN, TOPOLOGY, Case, declare, exclusive
from bench.scale_table import growth
from core.catalog import NODEPOOL_LABEL, TPU_TOPOLOGY_LABEL
from e2e.harness.nodes import pool_nodes

EXCLUSIVE_KEY = "alpha.jobset.sigs.k8s.io/exclusive-topology"


def _run(objects) -> dict:
    return next(j for j in objects.manifests("JobSet") if j["metadata"]["name"] == RUN)


def test_the_program_places_slices_by_pod_affinity_and_the_variant_by_node_selector():
    affinity = declare(Case(4, "affinity", kueue=False))
    annotations = _run(affinity)["metadata"]["annotations"]
    assert annotations[EXCLUSIVE_KEY] == NODEPOOL_LABEL and NODE_SELECTOR_STRATEGY_KEY not in annotations
    assert _run(affinity)["spec"]["replicatedJobs"][0]["replicas"] == 4
    selector = declare(Case(4, "node-selector", kueue=False))
    assert _run(selector)["metadata"]["annotations"][NODE_SELECTOR_STRATEGY_KEY] == "true"
    slices = {p["name"]: p for p in selector.node_pools if p["name"].startswith(POOL)}
    assert sorted(slices) == [f"{POOL}-s{i}" for i in range(4)]
    for i in range(4):
        [node, *_] = pool_nodes(slices[f"{POOL}-s{i}"], "c", "us-east5").nodes
        assert node["metadata"]["labels"][NAMESPACED_JOB_LABEL] == f"finetune_{RUN}-trainer-{i}"
        assert {"key": "alpha.jobset.sigs.k8s.io/no-schedule", "value": "true",
                "effect": "NoSchedule"} in node["spec"]["taints"]
    system = next(p for p in selector.node_pools if not p["name"].startswith(POOL))
    assert NAMESPACED_JOB_LABEL not in (system["nodeConfig"].get("labels") or {})


def test_through_kueue_the_run_carries_its_queue():
    run = _run(declare(Case(4, "affinity", kueue=True)))
    assert run["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] and run["spec"]["suspend"] is True


def test_the_variant_leaves_the_declared_objects_alone():
    objects = declare(Case(4, "affinity", kueue=False))
    node_selector_strategy(objects, RUN, POOL, 4)
    assert NODE_SELECTOR_STRATEGY_KEY not in _run(objects)["metadata"]["annotations"]
    assert all(NAMESPACED_JOB_LABEL not in (p["nodeConfig"].get("labels") or {}) for p in objects.node_pools)


def _pod(name: str, job: str, node: str) -> dict:
    return {"metadata": {"name": name, "labels": {"jobset.sigs.k8s.io/job-index": job}}, "spec": {"nodeName": node}}


def _node(pool: str, topology: str = TOPOLOGY) -> dict:
    return {"metadata": {"labels": {NODEPOOL_LABEL: pool, TPU_TOPOLOGY_LABEL: topology}}}


def test_exclusive_placement_is_judged_from_where_the_pods_are():
    nodes = {"a0": _node("p0"), "a1": _node("p0"), "b0": _node("p1"), "b1": _node("p1"), "x": _node("p2", "2x4")}
    assert exclusive([_pod("0-0", "0", "a0"), _pod("0-1", "0", "a1"), _pod("1-0", "1", "b0"),
                      _pod("1-1", "1", "b1")], nodes, 2) == "yes"
    assert exclusive([_pod("0-0", "0", "a0"), _pod("0-1", "0", "b0"), _pod("1-0", "1", "a1"),
                      _pod("1-1", "1", "b1")], nodes, 2).startswith("slices over several node pools")
    assert exclusive([_pod("0-0", "0", "x")], nodes, 1) == "pod 0-0 on a node of another topology"
    assert exclusive([_pod("0-0", "0", "a0"), _pod("1-0", "1", "a1")], nodes, 2) == "a node pool holds two slices"


def test_growth_compares_per_pod_figures_of_the_largest_and_smallest_size():
    rows = [{"slices": 4, "pods": 256, "strategy": "affinity", "kueue": False, "bound_s": 10.0,
             "net_cpu_ms_per_pod": 50.0},
            {"slices": 64, "pods": 4096, "strategy": "affinity", "kueue": False, "bound_s": 320.0,
             "net_cpu_ms_per_pod": 100.0}]
    assert growth(rows) == ["affinity none: per pod at 64 slices against 4: time to bound x2.00, CPU x2.00"]


def test_the_scheduler_rate_counts_only_while_pods_wait():
    from bench.scale_phases import backlog_rate

    # Two pods created at 0 and bound at 1 and 2; nothing waits from 2 to 10; a third waits from 10 to 10.5.
    rate, busy = backlog_rate([0.0, 0.0, 10.0], [1.0, 2.0, 10.5])
    assert busy == 2.5 and rate == round(3 / 2.5, 1)
    assert backlog_rate([], []) == (None, 0.0)


def test_the_phases_tell_creation_from_binding():
    from bench.scale_phases import follower_waits, phases
    from bench.scale_watch import PodTimes

    jobs = {"j0": PodTimes(created=100.5), "j1": PodTimes(created=101.0)}
    pods = {"0-0": PodTimes(created=101.0, bound=101.1, job="0", leader=True),
            "0-1": PodTimes(created=104.0, bound=104.2, job="0"),
            "1-0": PodTimes(created=101.5, bound=101.6, job="1", leader=True),
            "1-1": PodTimes(created=106.0, bound=106.5, job="1")}
    p = phases(jobs, pods, t0=100.0)
    assert (p["jobset_to_jobs_s"], p["jobs_to_pods_created_s"], p["created_to_bound_s"]) == (1.0, 5.0, 0.5)
    assert p["leaders_bound_s"] == 1.6 and p["schedule_latency"]["max"] == 0.5
    assert sorted(round(w, 1) for w in follower_waits(pods)) == [2.9, 4.4]
    pods["1-1"].bound = None  # a pod never bound: no end to the binding phase
    assert phases(jobs, pods, t0=100.0)["created_to_bound_s"] is None
