"""`make status STACK=<stack> [RUN=<run>]`: where each run of a stack is, what it has done and cost.

    python -m tools.status show --stack tpu-queued [--run gemma3-ladder] [--json] [--watch [SECONDS]]
        [--context CTX | --from-json DUMP] [--progress-dir DIR]

One line per run, then the details of one (`--run`, or the only run). The cluster is read with the
Kubernetes client (KUBECONFIG, its current context or --context), or from a `kubectl get
jobsets,workloads,provisioningrequests,pods -n finetune -o json` dump (--from-json); the progress
records from the stack's bucket with the Cloud Storage client, or from a local directory laid out
as the bucket (--progress-dir). Nothing runs in the cluster for it.

Exit codes (sysexits): 0; 66 the stack has nothing deployed, or no such run; 69 the cluster cannot
be reached; 78 the stack file is invalid.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from core.names import RUN_LABEL, RUNS_NAMESPACE
from stack.problems import ConfigError
from stack.reader import load_files
from tools.status_model import RunStatus
from tools.status_row import RunFacts, run_facts, status_row
from tools.status_sources import (BucketProgress, ClusterUnreachable, KubeCluster, LocalProgress, NotDeployed,
                                  from_dump, owned_by)

EX_NOINPUT, EX_UNAVAILABLE, EX_CONFIG = 66, 69, 78
ROOT = Path(__file__).resolve().parents[1]


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
        record, problem = progress.read(name)
        row = status_row(fact, jobset, workload, requests, pods, record, now, nodes)
        row.progress_problem = problem
        row.links = dict(fact.links)
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
        goodput = "-" if r.goodput is None else f"{100 * r.goodput:.0f}%"
        lines.append(f"{r.run:<22} {r.phase:<21} {rung:<5} {r.pods_ready:>2}/{r.pods:<2} {budget:>8} {step:>11} "
                     f"{_num(r.tokens_per_s, '.0f'):>9} {_num(r.loss, '.3f'):>7} {_duration(r.eta_seconds):>7} "
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
              f"  ETA              {_duration(r.eta_seconds)}",
              f"  wall time        {_duration(r.wall_seconds)} since {r.submitted_at or '-'}",
              f"  goodput          {'-' if r.goodput is None else f'{100 * r.goodput:.1f}%'} of the wall time "
              "spent training (restarts, restores and redone steps count as lost)",
              f"  spent            {r.chip_hours:.2f} chip-hours, ${_usd(r)}" + (f" ({r.price_note})" if r.price_note else "")]
    if r.progress_problem:
        lines.append(f"  progress record  {r.progress_problem}")
    lines += [f"  {what:<16} {url}" for what, url in r.links.items()]
    return lines


def _parse(argv):
    parser = argparse.ArgumentParser(prog="python -m tools.status", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("show", help="the stack's runs, and one run's details")
    show.add_argument("--stack", required=True)
    show.add_argument("--run")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    show.add_argument("--watch", nargs="?", type=float, const=10.0, help="refresh every SECONDS (default 10)")
    show.add_argument("--iterations", type=int, default=0, help=argparse.SUPPRESS)  # bounds --watch (tests)
    show.add_argument("--context", help="kubeconfig context (default: the current one)")
    show.add_argument("--from-json", help="a `kubectl get ... -o json` dump instead of the cluster")
    show.add_argument("--progress-dir", help="a directory laid out as the bucket, instead of the bucket")
    show.add_argument("--root", type=Path, default=ROOT,
                      help="the directory of Pulumi.yaml and the stack file (default: the repository's)")
    return parser.parse_args(argv)


def snapshot(args, config, facts) -> tuple[int, str]:
    """(exit code, text) of one look at the cluster."""
    try:
        objects = from_dump(args.from_json) if args.from_json else KubeCluster(args.context).objects(RUNS_NAMESPACE)
    except ClusterUnreachable as err:
        return EX_UNAVAILABLE, f"status: the cluster of stack {args.stack} cannot be reached: {err}"
    except NotDeployed as err:
        return EX_NOINPUT, f"status: stack {args.stack} has nothing deployed here: {err} (run `make up STACK={args.stack}`)"
    if not objects["jobsets"]:
        return EX_NOINPUT, f"status: stack {args.stack} has no runs submitted in namespace {RUNS_NAMESPACE!r}"
    progress = LocalProgress(args.progress_dir) if args.progress_dir else BucketProgress(config.data_bucket, config.project)
    found = rows(facts, objects, progress, time.time())
    if args.run:
        found = [r for r in found if r.run == args.run and r.phase != "not submitted"]
        if not found:
            return EX_NOINPUT, f"status: run {args.run!r} of stack {args.stack} has no JobSet in the cluster"
    if args.json:
        return 0, json.dumps([r.as_dict() for r in found], indent=1)
    lines = render_table(found)
    if len(found) == 1:
        lines += [""] + render_details(found[0])
    return 0, "\n".join(lines)


def main(argv=None) -> int:
    args = _parse(argv)
    try:
        config = load_files(args.stack, args.root)
    except (ConfigError, FileNotFoundError) as err:
        print(f"status: stack {args.stack}: {err}", file=sys.stderr)
        return EX_CONFIG
    facts = run_facts(config)
    if args.run and args.run not in facts:
        print(f"status: {args.run!r} is not a run of stack {args.stack}; runs: {', '.join(facts) or '(none)'}",
              file=sys.stderr)
        return EX_NOINPUT
    shown = 0
    while True:
        code, text = snapshot(args, config, facts)
        print(text, file=sys.stdout if code == 0 else sys.stderr, flush=True)
        shown += 1
        if args.watch is None or code != 0 or (args.iterations and shown >= args.iterations):
            return code
        time.sleep(args.watch)


if __name__ == "__main__":
    sys.exit(main())
