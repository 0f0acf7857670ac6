"""Which runs Kueue admits, on which pools, in which order; and the rules of ladders and priorities.

A run goes through Kueue when it needs it: it names a capacity ladder
(`ladder:`, pools tried in order after `pool`), a `priority`, or a queued
pool (GKE provisions a queued pool only through a ProvisioningRequest, which
Kueue's provisioning admission check creates). Every pool such a run may use
becomes a Kueue flavor, and every other run on a flavor goes through Kueue
too, so that Kueue accounts for every node it hands out; runs on the other
pools are applied as before. A stack with no such run and no queued pool
installs no Kueue.

The flavors are tried in one order (the ClusterQueue's), so the ladders of a
stack must agree on the order of the pools they share.
https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/#flavorfungibility

Kueue moves down a ladder on quota only: it admits a run on the first rung
whose quota has room, and keeps it there. A queued rung that is admitted
but whose ProvisioningRequest fails is retried on that same rung (the
workload is evicted and requeued, and the flavor scan restarts from the
first rung, which has room again), and after the ProvisioningRequestConfig's
retries the admission check is Rejected and the workload deactivated
(v0.19.2 pkg/controller/admissionchecks/provisioning/controller.go, the
`isFailed(pr)` case; pkg/scheduler/scheduler.go clears LastAssignment on
admission). It never falls to the next rung. So a queued pool may only be a
ladder's last rung, where "no capacity" ends the run whatever the ladder.

After an eviction Kueue alone does the same: a run admitted on a rung whose pods
are not all ready within `kueue.podsReadyTimeoutSeconds` (its nodes never came)
is evicted, its quota released, and requeued after a backoff; Kueue then scans
the flavors from the first again, so the run goes back to the first rung with
room. Kueue 0.19.2 keeps no record of the flavor a workload was evicted from
(the Workload's status has `requeueState` and `schedulingStats.evictions`,
reasons and counts only: apis/kueue/v1beta2/workload_types.go), and the scan's
progress is dropped on admission and whenever the ClusterQueue's usage changes,
which an eviction does (pkg/scheduler/scheduler.go `lastAssignmentOutdated`;
keps/1282-pods-ready-requeue-strategy, Story 2). So the stack runs a controller
of its own (controllers/ladder.py, manifests/ladder.py) that pins an evicted
run's pods to its next rung, whose value of the pool label `run_contract` gives
as `rung_pins`. Besides, a rung's quota is what its nodes hold (a shared pool's
queues in one cohort, their quotas together at most the pool, checked by the
preflight: admission/shared_pools.py), so a rung held by another team's run is
full to Kueue and the ladder falls through on quota.

Autopilot installs no Kueue: there a run's ladder over `shapes:` becomes a
custom ComputeClass of its own (manifests/compute_class.py), whose
priorities GKE tries in order when it creates the run's nodes, and the run's
pods select that class instead of one shape's capacity labels. Each run has
its own class, so Autopilot ladders need not agree on an order; `priority`
(a Kueue WorkloadPriorityClass) stays refused there.
https://cloud.google.com/kubernetes-engine/docs/concepts/about-custom-compute-classes
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from core.catalog import COMPUTE_CLASS_LABEL
from core.contract import SchedulingContract
from core.names import LOCAL_QUEUE, WORKLOAD_PRIORITIES, compute_class_name, legacy_compute_class_name
from stack.problems import Problem
from stack.runs import RunConfig


def rungs(run: RunConfig) -> tuple[str, ...]:
    """The pools a run may land on, in order of preference (a pool named twice counts once)."""
    return tuple(dict.fromkeys((run.pool, *run.ladder)))


def _needs_queue(run: RunConfig, contracts: Mapping[str, SchedulingContract]) -> bool:
    return bool(run.ladder or run.priority) or any(contracts[p].queued for p in rungs(run) if p in contracts)


def kueue_pools(runs: Sequence[RunConfig], contracts: Mapping[str, SchedulingContract]) -> set[str]:
    """The pools that are Kueue flavors: queued pools, and every rung of a run that goes through Kueue."""
    pools = {name for name, c in contracts.items() if c.queued}
    pools |= {p for run in runs if _needs_queue(run, contracts) for p in rungs(run) if p in contracts}
    grown = True
    while grown:  # a run sharing a pool with a queued run is queued too, with all its rungs
        more = {p for run in runs if set(rungs(run)) & pools for p in rungs(run) if p in contracts}
        grown, pools = not more <= pools, pools | more
    return pools


def queued_runs(runs: Sequence[RunConfig], contracts: Mapping[str, SchedulingContract]) -> list[RunConfig]:
    """The runs Kueue admits."""
    pools = kueue_pools(runs, contracts)
    return [run for run in runs if run.pool in pools]


def withdrawn(run: RunConfig, contracts: Mapping[str, SchedulingContract]) -> bool:
    """Whether a run is left undeclared: `suspend: true` on a run Kueue admits.

    Kueue owns such a JobSet's `spec.suspend`: it starts a suspended job whose Workload is admitted
    (v0.19.2 pkg/controller/jobframework/reconciler.go, "Job admitted, unsuspending"), so a declared
    suspension would be undone within seconds, and Pulumi leaves the field to Kueue (components/runs.py).
    A JobSet that is not declared is deleted: its pods get their grace period to write a checkpoint,
    Kueue releases its quota, and the checkpoints and progress record stay in the bucket; `suspend: false`
    declares it again and the trainer resumes from them. A run outside Kueue is suspended in place
    (JobSet `spec.suspend`, which its controller honours by deleting the Jobs' pods).
    """
    return run.suspend and contracts[run.pool].queue is not None


def with_queues(
    contracts: Mapping[str, SchedulingContract], runs: Sequence[RunConfig], autopilot: bool, namespace: str
) -> dict[str, SchedulingContract]:
    """The contracts in the stack's namespace, those of Kueue's flavors naming the LocalQueue (none on Autopilot)."""
    pools = set() if autopilot else kueue_pools(runs, contracts)
    return {n: dataclasses.replace(c, queue=LOCAL_QUEUE if n in pools else c.queue, namespace=namespace)
            for n, c in contracts.items()}


def flavor_order(runs: Sequence[RunConfig], contracts: Mapping[str, SchedulingContract]) -> list[str]:
    """The Kueue flavors in the order Kueue tries them: each ladder's order, else the pools' order."""
    pools = [p for p in contracts if p in kueue_pools(runs, contracts)]
    before = {(a, b) for a, b in _pairs(runs) if a in pools and b in pools}
    order: list[str] = []
    while len(order) < len(pools):
        left = [p for p in pools if p not in order]
        ready = [p for p in left if not any((q, p) in before for q in left if q != p)]
        order.append((ready or left)[0])  # a conflict (reported by the rules) falls back to the pools' order
    return order


def _pairs(runs: Iterable[RunConfig]) -> set[tuple[str, str]]:
    """(a, b) for every run that prefers pool a to pool b."""
    return {(r[i], r[j]) for run in runs for r in [rungs(run)] for i in range(len(r)) for j in range(i + 1, len(r))}


# --- the rules -----------------------------------------------------------------------


def queueing_problems(
    runs: Sequence[RunConfig], contracts: Mapping[str, SchedulingContract], autopilot: bool
) -> list[Problem]:
    """Every problem of the runs' ladders and priorities, keyed `runs[<i>].<key>`."""
    problems = []
    for i, run in enumerate(runs):
        problems += [p.under(f"runs[{i}]") for p in _run_problems(run, contracts, autopilot)]
    return problems + ([] if autopilot else _order_problems(runs))


def _run_problems(run: RunConfig, contracts: Mapping[str, SchedulingContract], autopilot: bool) -> list[Problem]:
    where = f"on run {run.name!r}"
    problems = []
    if run.priority is not None and run.priority not in WORKLOAD_PRIORITIES:
        problems.append(Problem("priority", run.priority, f"{where} is not a priority class",
                                ", ".join(WORKLOAD_PRIORITIES)))
    if autopilot and run.priority:
        problems.append(Problem("priority", run.priority, f"{where}: Kueue is not installed on Autopilot",
                                "no priority on Autopilot (a Standard cluster's pools)"))
    if autopilot and run.ladder:
        problems += _autopilot_capacity_problems(run, contracts, where)
    problems += _queued_rung_problems(run, contracts, where)
    seen = {run.pool}
    for j, pool in enumerate(run.ladder):
        if pool not in contracts:
            problems.append(Problem(f"ladder[{j}]", pool, f"does not exist {where}",
                                    ", ".join(map(repr, sorted(contracts)))))
        elif pool in seen:
            problems.append(Problem(f"ladder[{j}]", pool, f"{where} is already a rung of the ladder",
                                    "each pool once"))
        elif run.pool in contracts:
            problems += _rung_problems(f"ladder[{j}]", contracts[run.pool], contracts[pool], where)
        seen.add(pool)
    return problems


def _queued_rung_problems(run: RunConfig, contracts: Mapping[str, SchedulingContract], where: str) -> list[Problem]:
    """A queued pool anywhere but last on a ladder: Kueue would never move past it (module docstring)."""
    if not run.ladder:
        return []
    keys = ("pool", *(f"ladder[{j}]" for j in range(len(run.ladder))))
    pools = (run.pool, *run.ladder)
    return [
        Problem(key, pool, f"{where} is a queued pool before the ladder's last rung: Kueue 0.19.2 retries a failed "
                "ProvisioningRequest on the same rung, then deactivates the run; it never moves to the next rung",
                "a queued pool as the last rung only")
        for key, pool in zip(keys[:-1], pools[:-1])
        if pool in contracts and contracts[pool].queued
    ]


def _rung_problems(key: str, first: SchedulingContract, rung: SchedulingContract, where: str) -> list[Problem]:
    """A rung must have its first pool's shape: one manifest (chips, hosts, slices) fits every rung."""
    checks = (
        ("accelerator", first.shape.accelerator.name, rung.shape.accelerator.name),
        ("chips per host", first.chips_per_host, rung.chips_per_host),
        ("topology", first.shape.topology, rung.shape.topology),
        ("hosts per slice", first.hosts_per_slice, rung.hosts_per_slice),
        ("slices", first.slices, rung.slices),
    )
    for what, want, got in checks:
        if want != got:
            return [Problem(key, rung.pool, f"{where} has {what} {got!r}, but pool {first.pool!r} has {want!r}",
                            f"pools of {first.shape.description} x{first.slices} slice(s)")]
    return []


def _order_problems(runs: Sequence[RunConfig]) -> list[Problem]:
    problems, prefers = [], {}
    for i, run in enumerate(runs):
        r = rungs(run)
        for a, b in ((r[x], r[y]) for x in range(len(r)) for y in range(x + 1, len(r))):
            other = prefers.get((b, a))
            if other is not None:
                problems.append(Problem(
                    f"runs[{i}].ladder", list(run.ladder),
                    f"on run {run.name!r} tries pool {a!r} before {b!r}, and run {other!r} the other way; "
                    "Kueue tries a stack's flavors in one order", f"ladders that agree on the order of {a!r} and {b!r}",
                ))
            prefers.setdefault((a, b), run.name)
    return problems


def kueue_flavors(runs: Sequence[RunConfig], contracts: Mapping[str, SchedulingContract]) -> list[SchedulingContract]:
    """The contracts of Kueue's flavors, in the order Kueue tries them; empty: no Kueue."""
    return [contracts[p] for p in flavor_order(runs, contracts)]


# --- Autopilot: a ladder is a ComputeClass ---------------------------------------------

# The capacities a rung of an Autopilot ladder may have: each is a field of a
# ComputeClass priority rule (manifests/compute_class.py). Queued capacity is
# not offered on Autopilot at all (stack/rules.py).
AUTOPILOT_LADDER_CAPACITIES = ("on-demand", "spot", "flex-start", "reservation")


def _autopilot_capacity_problems(
    run: RunConfig, contracts: Mapping[str, SchedulingContract], where: str
) -> list[Problem]:
    keys = {run.pool: "pool", **{p: f"ladder[{j}]" for j, p in reversed(list(enumerate(run.ladder)))}}
    return [
        Problem(keys[pool], pool, f"{where} has capacity {contracts[pool].capacity!r}, which no ComputeClass "
                "priority of an Autopilot ladder expresses", ", ".join(AUTOPILOT_LADDER_CAPACITIES))
        for pool in rungs(run)
        if pool in contracts and contracts[pool].capacity not in AUTOPILOT_LADDER_CAPACITIES
    ]


def _ladder_contracts(run: RunConfig, contracts: Mapping[str, SchedulingContract]) -> tuple[SchedulingContract, ...]:
    return tuple(contracts[p] for p in rungs(run) if p in contracts)


def compute_classes(
    runs: Sequence[RunConfig], contracts: Mapping[str, SchedulingContract], autopilot: bool
) -> dict[str, tuple[SchedulingContract, ...]]:
    """Each Autopilot ladder's ComputeClass, by name: the contracts of its rungs, in order; none on Standard."""
    if not autopilot:
        return {}
    return {_compute_class(run, contracts): _ladder_contracts(run, contracts) for run in runs if run.ladder}


def _compute_class(run: RunConfig, contracts: Mapping[str, SchedulingContract]) -> str:
    return compute_class_name(contracts[run.pool].namespace, run.name)


def compute_class_renames(
    runs: Sequence[RunConfig], contracts: Mapping[str, SchedulingContract], autopilot: bool
) -> dict[str, str]:
    """Each Autopilot ladder's ComputeClass name -> the name it had before cluster-scoped names had a
    hash of their own (core/names.py): the Pulumi alias that shows the rename in a preview."""
    if not autopilot:
        return {}
    return {_compute_class(run, contracts): legacy_compute_class_name(contracts[run.pool].namespace, run.name)
            for run in runs if run.ladder}


def run_contract(run: RunConfig, contracts: Mapping[str, SchedulingContract]) -> SchedulingContract:
    """The contract a run's pods follow: its pool's; on Autopilot with a ladder, its ComputeClass's.

    The pods select the class alone: its priority rules carry the accelerator,
    chips per node and topology of every rung (the ladder rules give every
    rung the first one's shape), and GKE's guidance is to select a
    ComputeClass without other hard node selectors, which can keep GKE from
    applying the class's rules ("Request a compute class in a workload":
    https://cloud.google.com/kubernetes-engine/docs/how-to/custom-compute-classes#request_a_compute_class_in_a_workload;
    Google's accelerated-platforms TPU and GPU workloads select only
    `cloud.google.com/compute-class`). They tolerate every rung's taints (a
    Spot rung's nodes carry Spot's).
    """
    first = contracts[run.pool]
    if first.queue is not None:
        # Kueue admits the run to one of its rungs: its pods may land on any of them.
        ladder = _ladder_contracts(run, contracts)
        values = tuple(dict.fromkeys(v for rung in ladder for v in rung.pool_values))
        pins = tuple(r.pool_values[0] for r in ladder) if all(len(r.pool_values) == 1 for r in ladder) else ()
        return dataclasses.replace(first, rung_values=values, rung_pins=pins)
    if not (first.autopilot and run.ladder):
        return first
    name = _compute_class(run, contracts)
    tolerations: list[dict] = []
    for rung in _ladder_contracts(run, contracts):
        tolerations += [t for t in rung.tolerations if t not in tolerations]
    return dataclasses.replace(
        first,
        node_selector={COMPUTE_CLASS_LABEL: name},
        tolerations=tuple(tolerations),
        compute_class=name,
    )
