"""`make status STACK=<stack> [RUN=<run>]`: where each run of a stack is, what it has done and cost.

    python -m tools.status show --stack tpu-queued [--run gemma3-ladder] [--json] [--watch [SECONDS]]
        [--context CTX | --from-json DUMP] [--progress-dir DIR]

One line per run, then the details of one (`--run`, or the only run). The cluster is read with the
Kubernetes client through the stack's own kubeconfig context, never the current one
(tools/status/context.py: an existing cluster's `existingCluster.context`, else the context
`gcloud container clusters get-credentials` writes for the stack's cluster; --context names
another), or from a `kubectl get jobsets,workloads,provisioningrequests,pods -n <namespace> -o
json` dump (--from-json); the progress records from the stack's bucket with the Cloud Storage
client, or from a local directory laid out as the bucket (--progress-dir). The first line says
which context and namespace were read (on stderr with --json). Nothing runs in the cluster for it.

Exit codes (sysexits): 0; 66 the stack has nothing deployed, or no such run; 69 the cluster cannot
be reached; 78 the stack file is invalid, or the kubeconfig has no context for the stack's cluster
(the message says the `gcloud container clusters get-credentials` command that writes it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from core.names import RUN_LABEL
from stack.problems import ConfigError
from stack.reader import load_files
from tools.status.context import ContextMissing, check, stack_context
from tools.status.model import RunStatus
from tools.status.row import RunFacts, run_facts, status_row
from tools.status.sources import (BucketProgress, ClusterUnreachable, KubeCluster, LocalProgress, NotDeployed,
                                  from_dump, owned_by)

EX_NOINPUT, EX_UNAVAILABLE, EX_CONFIG = 66, 69, 78
ROOT = Path(__file__).resolve().parents[2]


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
    lines += [f"  {what:<16} {url}" for what, url in r.links.items()]
    return lines


def _eta(r: RunStatus) -> str:
    if r.progressing is False:
        last = f"its last record, at step {r.step}" if r.step is not None else "its submission: no record yet"
        return f"none: not progressing since {r.stalled_since or '-'} ({last}); {r.stalled_why}"
    return _duration(r.eta_seconds)


def _parse(argv):
    parser = argparse.ArgumentParser(prog="python -m tools.status", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("show", help="the stack's runs, and one run's details")
    show.add_argument("--stack", required=True)
    show.add_argument("--run")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    show.add_argument("--watch", nargs="?", type=float, const=10.0, help="refresh every SECONDS (default 10)")
    show.add_argument("--iterations", type=int, default=0, help=argparse.SUPPRESS)  # bounds --watch (tests)
    show.add_argument("--context", help="kubeconfig context (default: the stack's own cluster's)")
    show.add_argument("--from-json", help="a `kubectl get ... -o json` dump instead of the cluster")
    show.add_argument("--progress-dir", help="a directory laid out as the bucket, instead of the bucket")
    show.add_argument("--root", type=Path, default=ROOT,
                      help="the directory of Pulumi.yaml and the stack file (default: the repository's)")
    return parser.parse_args(argv)


def _objects(args, config) -> tuple[dict, str]:
    """The namespace's objects, and which cluster context (or dump) they were read from."""
    namespace = config.runs_namespace
    if args.from_json:
        return from_dump(args.from_json), f"stack {args.stack}: objects from {args.from_json}, namespace {namespace}"
    ctx = stack_context(config, args.context)
    check(args.stack, ctx)
    cluster = KubeCluster(ctx.context, ctx.kubeconfig)
    return cluster.objects(namespace), f"stack {args.stack}: read {ctx.describe()}, namespace {namespace}"


def snapshot(args, config, facts) -> tuple[int, str, str]:
    """(exit code, text, where it was read) of one look at the cluster."""
    namespace = config.runs_namespace
    try:
        objects, source = _objects(args, config)
    except ContextMissing as err:
        return EX_CONFIG, f"status: {err}", ""
    except ClusterUnreachable as err:
        return EX_UNAVAILABLE, f"status: the cluster of stack {args.stack} cannot be reached: {err}", ""
    except NotDeployed as err:
        return (EX_NOINPUT, f"status: stack {args.stack} has nothing deployed here: {err} "
                f"(run `make up STACK={args.stack}`)", "")
    if not objects["jobsets"]:
        return EX_NOINPUT, f"status: stack {args.stack} has no runs submitted in namespace {namespace!r}", source
    progress = LocalProgress(args.progress_dir) if args.progress_dir else BucketProgress(config.data_bucket, config.project)
    found = rows(facts, objects, progress, time.time())
    if args.run:
        found = [r for r in found if r.run == args.run and r.phase != "not submitted"]
        if not found:
            return EX_NOINPUT, f"status: run {args.run!r} of stack {args.stack} has no JobSet in the cluster", source
    if args.json:
        return 0, json.dumps([r.as_dict() for r in found], indent=1), source
    lines = render_table(found)
    if len(found) == 1:
        lines += [""] + render_details(found[0])
    return 0, "\n".join(lines), source


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
        code, text, source = snapshot(args, config, facts)
        if source:  # which cluster context was read: before the table, or beside --json's output
            print(source, file=sys.stderr if args.json or code else sys.stdout, flush=True)
        print(text, file=sys.stdout if code == 0 else sys.stderr, flush=True)
        shown += 1
        if args.watch is None or code != 0 or (args.iterations and shown >= args.iterations):
            return code
        time.sleep(args.watch)


if __name__ == "__main__":
    sys.exit(main())
