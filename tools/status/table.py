"""The status table: a row per run of the stack (tools/status/row.py) from the cluster's objects and the
progress records, and its text (`make status`: one line per run, then one run's details)."""

from __future__ import annotations

from collections.abc import Mapping

from core.names import RUN_LABEL
from tools.status.model import RunStatus
from tools.status.row import RunFacts, status_row
from tools.status.sources import checkpoint_mount, owned_by


def rows(facts: Mapping[str, RunFacts], objects: Mapping[str, list], progress, now: float) -> list[RunStatus]:
    """A status row for each run of the stack; `not submitted` where the cluster has no JobSet of it."""
    out = []
    for name, fact in facts.items():
        jobset = next((j for j in objects["jobsets"] if j["metadata"]["name"] == name), None)
        if jobset is None:
            out.append(RunStatus(run=name, phase="not submitted", detail="no JobSet in the cluster (make up)",
                                 pods=fact.pods, slices=fact.slices, chips=fact.chips, links=dict(fact.links)))
            continue
        workload = next((w for w in objects["workloads"] if owned_by(w, "JobSet", name)), None)
        wl_name = (workload or {}).get("metadata", {}).get("name", "")
        requests = [r for r in objects["requests"] if wl_name and owned_by(r, "Workload", wl_name)]
        pods = [p for p in objects["pods"] if (p["metadata"].get("labels") or {}).get(RUN_LABEL) == name]
        on = {(p.get("spec") or {}).get("nodeName") for p in pods}
        nodes = [n for n in objects.get("nodes", ()) if n["metadata"]["name"] in on]
        record, problem = progress.read(name, checkpoint_mount(jobset))
        row = status_row(fact, jobset, workload, requests, pods, record, now, nodes)
        row.progress_problem = problem
        row.links = dict(fact.links)
        if fact.export_prefix:
            row.export, row.evaluation = progress.export(fact.export_prefix)
        out.append(row)
    return out


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _num(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _usd(row: RunStatus) -> str:
    return f"{row.usd_high:.2f}" if row.usd_low == row.usd_high else f"{row.usd_low:.2f}-{row.usd_high:.2f}"


def render_table(found: list[RunStatus]) -> list[str]:
    lines = [f"{'run':<22} {'phase':<21} {'rung':<5} {'pods':>5} {'restarts':>8} {'step':>11} {'tokens/s':>9} "
             f"{'loss':>7} {'ETA':>7} {'wall':>7} {'goodput':>7} {'$':>13}"]
    for r in found:
        rung = f"{r.rung.index}/{r.rung.of}" if r.rung else "?"
        step = f"{r.step}/{r.total_steps}" if r.step is not None else "-"
        budget = f"{r.restarts_counted}/{r.max_restarts if r.max_restarts is not None else '-'}"
        goodput = "-" if r.goodput is None else f"{100 * r.goodput:.0f}%" + ("!" if r.goodput > 1 else "")
        eta = "stalled" if r.progressing is False else _duration(r.eta_seconds)
        lines.append(f"{r.run:<22} {r.phase:<21} {rung:<5} {r.pods_ready:>2}/{r.pods:<2} {budget:>8} {step:>11} "
                     f"{_num(r.tokens_per_s, '.0f'):>9} {_num(r.loss, '.3f'):>7} {eta:>7} "
                     f"{_duration(r.wall_seconds):>7} {goodput:>7} {_usd(r):>13}")
    return lines


def render_details(r: RunStatus) -> list[str]:
    rung = f"rung {r.rung.index} of {r.rung.of}: pool {r.rung.pool} ({r.rung.capacity})" if r.rung else "not known yet"
    lines = [f"run {r.run}: {r.phase}" + (f" ({r.detail})" if r.detail else ""),
             f"  on               {rung}",
             f"  slices ready     {r.slices_ready}/{r.slices}; pods ready {r.pods_ready}/{r.pods}",
             f"  restarts         {r.restarts_counted} of a budget of {r.max_restarts} ({r.restarts} in all, "
             "disruptions included)"]
    if r.phase == "failed":
        lines.append(f"  failure          {r.reason or '-'}; exit code {_num(r.exit_code, 'd')}")
    lines += [f"  step             {_num(r.step, 'd')} of {_num(r.total_steps, 'd')}; last checkpoint at "
              f"{_num(r.checkpoint_step, 'd')}",
              f"  tokens/s         {_num(r.tokens_per_s, '.1f')}",
              f"  loss             {_num(r.loss, '.4f')} (eval {_num(r.eval_loss, '.4f')})",
              f"  ETA              {_eta(r)}",
              f"  wall time        {_duration(r.wall_seconds)} since {r.measured_from or '-'}"
              + (f" (JobSet submitted {r.submitted_at})" if r.submitted_at and r.submitted_at != r.measured_from else ""),
              f"  goodput          {'-' if r.goodput is None else f'{100 * r.goodput:.1f}%'} of the wall time "
              "spent training (restarts, restores and redone steps count as lost)",
              f"  spent            {r.chip_hours:.2f} chip-hours, ${_usd(r)}" + (f" ({r.price_note})" if r.price_note else "")]
    lines += [f"  note             {note}" for note in r.notes]
    if r.progress_problem:
        lines.append(f"  progress record  {r.progress_problem}")
    if r.export:
        lines.append(f"  export           {r.export}")
    if r.evaluation:
        lines.append(f"  eval             {r.evaluation}")
    lines += [f"  {what:<16} {url}" for what, url in r.links.items()]
    return lines


def _eta(r: RunStatus) -> str:
    if r.progressing is False:
        last = f"its last record, at step {r.step}" if r.step is not None else "its submission: no record yet"
        return f"none: not progressing since {r.stalled_since or '-'} ({last}); {r.stalled_why}"
    return _duration(r.eta_seconds)


