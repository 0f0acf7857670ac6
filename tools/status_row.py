"""One status row per run: the phase (tools/status_phase.py) with pods, restarts, progress, ETA,
wall time, goodput, chip-hours and $ so far at the price of the rung the run got (core/prices.py).

Goodput is the time spent training (the progress record's train_seconds: steps a restart redid are
taken out) over the time since the JobSet was submitted, up to its end or now; queueing, startup,
restores, restarts and evaluation are the rest. Chips are billed from the earlier of the trainer's
first start (the record's started_at) and the start of the run's oldest pod now on a node (its
`status.startTime`, so a run without a record yet is billed too) to the end or now: nodes are
held through restarts and restores; the time before it (queueing, node creation) is not counted,
so the figure is a lower bound of what the nodes bill where they were created earlier.
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
from tools.status_model import Rung, RunStatus, condition, parse_time
from tools.status_phase import admitted_pool, failed_exit_code, phase, pods_ready


@dataclass(frozen=True)
class RunFacts:
    """What the stack says of one run: its ladder's pools in order, with their capacity and shape."""

    name: str
    ladder: tuple[tuple[str, str], ...]  # (pool, capacity), the run's pool first
    shape: Shape
    slices: int
    pods: int  # hosts per slice x slices
    chips: int
    queued: bool  # Kueue admits it
    links: tuple[tuple[str, str], ...] = ()  # (what, url): the console page and the Cloud Logging query


def run_facts(config) -> dict[str, RunFacts]:
    contracts = config.contracts()
    out = {}
    for run in config.runs:
        first = contracts[run.pool]
        per_host = run.chips_per_host or first.chips_per_host
        out[run.name] = RunFacts(
            name=run.name,
            ladder=tuple((p, contracts[p].capacity) for p in rungs(run) if p in contracts),
            shape=first.shape, slices=first.slices, pods=first.hosts_per_slice * first.slices,
            chips=per_host * first.hosts_per_slice * first.slices, queued=first.queue is not None,
            links=tuple(run_links(run_place(config, run.name)).items()),
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
    pool = admitted_pool(workload) if workload is not None else None
    if pool is None:
        pool = pools[0] if len(pools) == 1 else _node_rung(pools, facts, nodes)
    if pool not in pools:
        return None
    i = pools.index(pool)
    return Rung(i + 1, len(pools), pool, facts.ladder[i][1])


def _end(jobset: Mapping, now: float) -> float:
    for kind in ("Completed", "Failed"):
        c = condition(jobset, kind)
        if c and c.get("status") == "True" and c.get("lastTransitionTime"):
            return parse_time(c["lastTransitionTime"])
    return now


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
    if row.phase in ("running", "restarting", "admitted") and record["step"] and record["train_seconds"] > 0:
        per_step = record["train_seconds"] / record["step"]
        since = max(0.0, now - parse_time(record["updated_at"]))
        row.eta_seconds = round(max(0.0, (record["total_steps"] - record["step"]) * per_step - since), 1)


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
    end = _end(jobset, now)
    if submitted:
        row.submitted_at = submitted
        row.wall_seconds = round(max(0.0, end - parse_time(submitted)), 1)
    starts = [parse_time(p["status"]["startTime"]) for p in pods
              if (p.get("spec") or {}).get("nodeName") and (p.get("status") or {}).get("startTime")]
    if record is not None:
        starts.append(parse_time(record["started_at"]))
    billed = max(0.0, end - min(starts)) if starts else 0.0
    if record is not None:
        _progress(row, record, now)
        if row.wall_seconds > 0:
            row.goodput = round(min(1.0, record["train_seconds"] / row.wall_seconds), 4)
    _money(row, facts, row.rung, billed)
    return row
