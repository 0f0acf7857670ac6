"""How each slice of a multi-host TPU run gets a node pool of its own: JobSet's exclusive placement.

Every multi-host TPU JobSet carries `alpha.jobset.sigs.k8s.io/exclusive-topology:
cloud.google.com/gke-nodepool` (manifests/jobset.py): one Job per slice, each on a node pool no
other Job uses. JobSet v0.12.0 enforces it one of two ways:

- pod affinity (the default): its pod webhook gives each Job's leader pod (completion index 0) a
  required pod affinity to its own Job and a required anti-affinity to every other Job, by node
  pool; the followers are refused until the leader is bound, then get a node selector for the
  leader's node pool (pkg/webhooks/pod_webhook.go, `patchPod`, `setExclusiveAffinities`,
  `ValidateCreate`). The scheduler evaluates those terms against every pod it places;
- node selector (`alpha.jobset.sigs.k8s.io/node-selector`): the JobSet controller gives each
  Job the node selector `alpha.jobset.sigs.k8s.io/namespaced-job: <namespace>_<job>` and a
  toleration of the taint `alpha.jobset.sigs.k8s.io/no-schedule` (pkg/controllers/
  jobset_controller.go, `addNamespacedJobNodeSelector`, `addTaintToleration`), and the pod
  webhook leaves the pods alone. The nodes must carry that label and taint already: "the user
  must add the JobSet name node label to the desired topologies separately"
  (api/jobset/v1alpha2/jobset_types.go, `NodeSelectorStrategyKey`); JobSet's
  hack/label_nodes/label_nodes.py labels and taints one GKE node pool per Job, "to dramatically
  speed up scheduling of pods for very large JobSets".

The program declares the node pools, so it can declare that label and taint on them: slice `i`'s
node pool (`<pool>-s<i>`) is labelled with the namespaced name of Job `<run>-trainer-<i>` and
tainted so that only JobSet pods of this strategy land on it. GKE updates a node pool's labels
and taints in place, without recreating its nodes
(https://cloud.google.com/kubernetes-engine/docs/how-to/update-existing-nodepools).

That ties a node pool to one run, so the strategy is used only where it can hold:
- the pool has at least `NODE_SELECTOR_MIN_SLICES` slices (bench/scale.py measured both
  strategies; the figures are in README.md, "Performance");
- the stack declares the pool (not an existing cluster's), and it is a multi-host TPU pool;
- exactly one run of the stack may use it (its pool or a rung of its ladder), and every pool that
  run may use qualifies too: the run's pods select its own Jobs' label on whichever rung;
- each label value fits a label's 63 characters.
Anything else keeps pod affinity.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from core.catalog import Taint
from core.contract import SchedulingContract
from core.names import REPLICATED_JOB
from core.syntax import LABEL_VALUE_MAX
from stack.contracts import node_pool_names
from stack.models import PoolConfig
from stack.queueing import rungs
from stack.runs import RunConfig

# jobset_types.go (v0.12.0): NodeSelectorStrategyKey, NamespacedJobKey, NoScheduleTaintKey.
NODE_SELECTOR_STRATEGY_KEY = "alpha.jobset.sigs.k8s.io/node-selector"
NAMESPACED_JOB_LABEL = "alpha.jobset.sigs.k8s.io/namespaced-job"
# The value and effect label_nodes.py gives it; the controller's toleration is `Exists`.
NO_SCHEDULE_TAINT = Taint("alpha.jobset.sigs.k8s.io/no-schedule", "true", "NoSchedule")
# From this many slices up, a pool's run is placed by node selector (README.md, "Performance").
NODE_SELECTOR_MIN_SLICES = 16


def namespaced_job(namespace: str, run: str, index: int) -> str:
    """The label value the JobSet controller selects for Job `index` of `run` (`namespacedJobName`)."""
    return f"{namespace}_{run}-{REPLICATED_JOB}-{index}"


def _qualifies(pool: PoolConfig) -> bool:
    return pool.shape().multi_host and pool.slices >= NODE_SELECTOR_MIN_SLICES


def node_selector_runs(pools: Sequence[PoolConfig], runs: Iterable[RunConfig], namespace: str,
                       declared: bool) -> dict[str, tuple[str, ...]]:
    """The runs placed by node selector, each with the pools it may use. `declared`: the stack
    declares its node pools (its own cluster, Standard)."""
    if not declared:
        return {}
    runs = list(runs)
    by_name = {p.name: p for p in pools}
    users: dict[str, int] = {}
    for run in runs:
        for pool in rungs(run):
            users[pool] = users.get(pool, 0) + 1
    out = {}
    for run in runs:
        mine = [by_name.get(p) for p in rungs(run)]
        if not all(p is not None and _qualifies(p) and users[p.name] == 1 for p in mine):
            continue
        if len(namespaced_job(namespace, run.name, max(p.slices for p in mine) - 1)) > LABEL_VALUE_MAX:
            continue
        out[run.name] = tuple(p.name for p in mine)
    return out


def node_pool_labels(pools: Sequence[PoolConfig], placed: Mapping[str, tuple[str, ...]],
                     namespace: str) -> dict[str, dict[str, str]]:
    """GKE node pool name -> the label its nodes carry for the node-selector strategy."""
    out = {}
    for run, pool_names in placed.items():
        for pool in (p for p in pools if p.name in pool_names):
            for index, gke_name in enumerate(node_pool_names(pool.name, pool.slices)):
                out[gke_name] = {NAMESPACED_JOB_LABEL: namespaced_job(namespace, run, index)}
    return out


def with_node_selector_placement(contracts: Mapping[str, SchedulingContract],
                                 placed: Mapping[str, tuple[str, ...]]) -> dict[str, SchedulingContract]:
    """The contracts, those of the pools of runs placed by node selector marked so."""
    pools = {p for names in placed.values() for p in names}
    return {name: dataclasses.replace(c, node_selector_placement=True) if name in pools else c
            for name, c in contracts.items()}
