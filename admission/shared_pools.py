"""A shared pool's quotas: the ClusterQueues already on the cluster that admit runs to the stack's pools.

Kueue admits a workload against its ClusterQueue's quota, never against the
nodes: two ClusterQueues whose nominal quotas of one node pool add up to more
than the pool each admit runs, and the runs of the one admitted last wait for
nodes that never come (Kueue evicts them after `waitForPodsReady`'s timeout and
requeues them on the same rung, sigs.k8s.io/kueue v0.19.2
keps/1282-pods-ready-requeue-strategy, "Story 2"). Borrowing in a cohort moves
only idle nominal quota, so the nominal quotas of every queue on a pool must
together fit the pool, in a cohort or not
(https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/#cohort).

A ClusterQueue admits runs to a pool when one of its flavors selects the pool's
nodes: a flavor whose `nodeLabels` hold the pool's label (`gke-finetune/pool`, or
GKE's node pool label in an existing cluster) with one of the pool's values, or
the stack's own flavor of the pool by name (a shared pool's flavor,
core/names.py `shared_flavor_name`). A flavor without node labels selects every
node and says nothing of which pool a queue means: it is not counted.

Pure functions over the ClusterQueues and ResourceFlavors the cluster returns
(components/preflight.py reads them, read-only, and says "not checked" where it
may not).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from core.contract import SchedulingContract
from core import quantity
from stack.problems import MISSING, Problem


@dataclass(frozen=True)
class Holder:
    """Another ClusterQueue's nominal quota of a pool's chips."""

    queue: str
    flavor: str
    chips: int
    cohort: str | None

    def __str__(self) -> str:
        cohort = f"cohort {self.cohort!r}" if self.cohort else "no cohort"
        return f"ClusterQueue {self.queue!r} ({self.chips} chips on flavor {self.flavor!r}, {cohort})"


def _selects(flavor: Mapping, contract: SchedulingContract) -> bool:
    """Whether a ResourceFlavor selects the pool's nodes by its label (the stack's own flavor, by name, is
    counted by `holders` itself)."""
    labels = (flavor.get("spec") or {}).get("nodeLabels") or {}
    return bool(contract.pool_label) and labels.get(contract.pool_label) in contract.pool_values


def holders(contract: SchedulingContract, own_queue: str, queues: Iterable[Mapping],
            flavors: Iterable[Mapping]) -> list[Holder]:
    """The other ClusterQueues' nominal quotas of the pool's chips, by flavor."""
    on_pool = {f["metadata"]["name"] for f in flavors if _selects(f, contract)} | {contract.flavor}
    found = []
    for queue in queues:
        name, spec = queue["metadata"]["name"], queue.get("spec") or {}
        if name == own_queue:
            continue
        for group in spec.get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                if flavor.get("name") not in on_pool:
                    continue
                chips = sum(int(quantity.parse(str(r.get("nominalQuota", 0)))) for r in flavor.get("resources") or []
                            if r.get("name") == contract.resource_name)
                if chips:
                    # v1beta2 names it cohortName (Kueue v0.19.2 apis/kueue/v1beta2/clusterqueue_types.go)
                    found.append(Holder(name, flavor["name"], chips, spec.get("cohortName")))
    return found


def overcommit_problems(flavors: Sequence[SchedulingContract], keys: Mapping[str, str], own_queue: str,
                        queues: Sequence[Mapping], resource_flavors: Sequence[Mapping]) -> list[Problem]:
    """A pool whose ClusterQueues' nominal quotas, the stack's with the others', add up to more than it holds.
    `keys`: each pool's stack key (`pools[<i>]`)."""
    problems = []
    for contract in flavors:
        others = holders(contract, own_queue, queues, resource_flavors)
        taken = sum(h.chips for h in others)
        whole, ours = contract.quota_chips, contract.nominal_chips
        if not others or taken + ours <= whole:
            continue
        left = max(whole - taken, 0)
        listed = "; ".join(map(str, others))
        value, mine = (ours, "of") if contract.shared else (MISSING, "the stack's queue taking all of")
        problems.append(Problem(
            f"{keys[contract.pool]}.quota.chips", value,
            f"{mine} pool {contract.pool!r} ({whole} chips), and the cluster's other queues on it hold {taken} "
            f"chips ({listed}), so the queues would admit {taken + ours} chips of runs to it and the last runs' pods would wait for nodes "
            "that never come",
            f"at most {left} chips here (this team: `quota: {{chips: {left}}}`, a multiple of a run's "
            f"{contract.total_chips}; with 0 the stack borrows the others' idle part in their cohort), or smaller "
            f"nominalQuotas of {contract.resource_name} in those ClusterQueues (their owners: the stack whose "
            "namespace names the queue, or the platform team); the teams' quotas together at most the pool",
        ))
    return problems
