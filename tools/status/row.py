"""One status row per run: the phase (tools/status/phase.py) with pods, restarts, progress, ETA,
wall time, goodput, chip-hours and $ so far at the price of the rung the run got (core/prices.py).

Wall time, goodput and money are measured over one interval, and whether the run progresses (its
ETA) or not is decided by tools/status/clock.py. Goodput is the time spent training (the progress
record's train_seconds: steps a restart redid are taken out) over the wall time; queueing,
startup, restores, restarts and evaluation are the rest. It is shown as computed: a figure above
100% (a record whose training time exceeds the wall time: clocks that disagree, or a record that
is not this run's) is shown with a note, never capped. Chips are billed over the billed part of
the interval at the rung's price; a reservation's price is the reserved capacity's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from core import prices
from core.catalog import FLEX_START_LABEL, QUEUED_LABEL, RESERVATION_NAME_LABEL, SPOT_LABEL, Shape
from core.names import POOL_LABEL
from core.links import run_links
from stack.places import run_place
from stack.queueing import rungs
from tools.status.clock import interval, iso, progress
from tools.status.model import Rung, RunStatus, parse_time
from tools.status.phase import admitted_flavor, failed_exit_code, phase, pods_ready


@dataclass(frozen=True)
class RunFacts:
    """What the stack says of one run: its ladder's pools in order, with their capacity and shape."""

    name: str
    ladder: tuple[tuple[str, str], ...]  # (pool, capacity), the run's pool first
    flavors: tuple[str, ...]  # each rung's Kueue ResourceFlavor (SchedulingContract.flavor), as `ladder`
    shape: Shape
    slices: int
    pods: int  # hosts per slice x slices
    chips: int
    queued: bool  # Kueue admits it
    links: tuple[tuple[str, str], ...] = ()  # (what, url): the console page and the Cloud Logging query
    export_prefix: str = ""  # exports/<stack>/<run>, for a run with `export:`


def run_facts(config) -> dict[str, RunFacts]:
    contracts = config.contracts()
    out = {}
    for run in config.runs:
        first = contracts[run.pool]
        per_host = run.chips_per_host or first.chips_per_host
        pools = [p for p in rungs(run) if p in contracts]
        out[run.name] = RunFacts(
            name=run.name,
            ladder=tuple((p, contracts[p].capacity) for p in pools),
            flavors=tuple(contracts[p].flavor for p in pools),
            shape=first.shape, slices=first.slices, pods=first.hosts_per_slice * first.slices,
            chips=per_host * first.hosts_per_slice * first.slices, queued=first.queue is not None,
            links=tuple(run_links(run_place(config, run.name)).items()),
            export_prefix=config.export_prefixes().get(run.name, ""),
        )
    return out


def node_capacity(labels: Mapping[str, str]) -> str:
    """The capacity a node came from, by the labels GKE puts on it (core/catalog.py gives their sources)."""
    if labels.get(SPOT_LABEL) == "true":
        return "spot"
    if labels.get(QUEUED_LABEL) == "true":
        return "queued"
    if labels.get(FLEX_START_LABEL) == "true":
        return "flex-start"
    return "reservation" if labels.get(RESERVATION_NAME_LABEL) else "on-demand"


def _node_rung(pools: list[str], facts: RunFacts, nodes: Sequence[Mapping]) -> str | None:
    """The rung of the nodes the pods run on: their pool label (Standard), else their capacity
    (Autopilot, whose ComputeClass rungs differ in capacity)."""
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") or {}
        if labels.get(POOL_LABEL) in pools:
            return labels[POOL_LABEL]
        matching = [p for p, capacity in facts.ladder if capacity == node_capacity(labels)]
        if matching:
            return matching[0]
    return None


def the_rung(facts: RunFacts, workload: Mapping | None, nodes: Sequence[Mapping] = ()) -> Rung | None:
    """The rung Kueue admitted the run on, else the one its pods' nodes are on; a one-pool run is
    on its pool; None while not known."""
    pools = [p for p, _ in facts.ladder]
    flavor = admitted_flavor(workload) if workload is not None else None
    # Kueue names the ResourceFlavor, cluster-scoped and named after the stack's namespace and the pool.
    pool = dict(zip(facts.flavors, pools)).get(flavor) if flavor is not None else None
    if flavor is None:
        pool = pools[0] if len(pools) == 1 else _node_rung(pools, facts, nodes)
    if pool not in pools:
        return None
    i = pools.index(pool)
    return Rung(i + 1, len(pools), pool, facts.ladder[i][1])


def _money(row: RunStatus, facts: RunFacts, rung: Rung | None, billed_s: float) -> None:
    capacities = [rung.capacity] if rung else sorted({c for _, c in facts.ladder})
    ranges = [prices.usd_per_hour(facts.shape, c, facts.slices) for c in capacities]
    hours = billed_s / 3600
    row.chip_hours = round(facts.chips * hours, 4)
    row.usd_low = round(min(lo for lo, _ in ranges) * hours, 2)
    row.usd_high = round(max(hi for _, hi in ranges) * hours, 2)
    notes = [prices.price(facts.shape, c).note for c in capacities]
    row.price_note = ("rung not known yet: the ladder's range; " if rung is None else "") + "; ".join(n for n in notes if n)


def _progress(row: RunStatus, record: Mapping, now: float) -> None:
    row.step, row.total_steps = record["step"], record["total_steps"]
    row.tokens_per_s, row.loss, row.eval_loss = record.get("tokens_per_s"), record.get("loss"), record.get("eval_loss")
    row.checkpoint_step = record.get("checkpoint_step")
    if row.progressing and record["step"] and record["train_seconds"] > 0:
        per_step = record["train_seconds"] / record["step"]
        since = max(0.0, now - parse_time(record["updated_at"]))
        row.eta_seconds = round(max(0.0, (record["total_steps"] - record["step"]) * per_step - since), 1)


def _goodput(row: RunStatus, record: Mapping) -> None:
    if row.wall_seconds <= 0:
        return
    row.goodput = round(record["train_seconds"] / row.wall_seconds, 4)
    if row.goodput > 1:
        row.notes.append(f"goodput {100 * row.goodput:.0f}% is above 100%: the record's training time "
                         f"({record['train_seconds']:.0f} s) exceeds the wall time ({row.wall_seconds:.0f} s) since "
                         f"{row.measured_from}: clocks that disagree, or a record that is not this run's")


def status_row(facts: RunFacts, jobset: Mapping, workload: Mapping | None, requests: Sequence[Mapping],
               pods: Sequence[Mapping], record: Mapping | None, now: float,
               nodes: Sequence[Mapping] = ()) -> RunStatus:
    """The status of one run at `now` (seconds since the epoch); `nodes`: those its pods run on."""
    name, detail = phase(jobset, workload, requests, pods, facts.pods)
    row = RunStatus(run=facts.name, phase=name, detail=detail, pods=facts.pods, slices=facts.slices,
                    chips=facts.chips, pods_ready=pods_ready(pods))
    row.rung = the_rung(facts, workload, nodes)
    status, spec = jobset.get("status") or {}, jobset.get("spec") or {}
    row.slices_ready = sum(int(r.get("ready") or 0) for r in status.get("replicatedJobsStatus") or ())
    row.restarts, row.restarts_counted = int(status.get("restarts") or 0), int(status.get("restartsCountTowardsMax") or 0)
    row.max_restarts = (spec.get("failurePolicy") or {}).get("maxRestarts")
    if name == "failed":
        row.exit_code, row.reason = failed_exit_code(pods), detail
    submitted = (jobset.get("metadata") or {}).get("creationTimestamp")
    row.submitted_at = submitted or ""
    span = interval(jobset, pods, record, now)
    row.measured_from, row.wall_seconds = iso(span.start), span.wall_seconds
    if span.note:
        row.notes.append(span.note)
    state = progress(name, detail, jobset, workload, pods, record)
    row.progressing, row.stalled_since, row.stalled_why = state.progressing, state.since, state.why
    if record is not None:
        _progress(row, record, now)
        _goodput(row, record)
    _money(row, facts, row.rung, span.billed_seconds)
    return row
