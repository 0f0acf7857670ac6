"""python -m tools.status show --stack <stack> [--run <run>] [--json] [--watch [SECONDS]] ...
(tools/status/__init__.py says what it reads, and its exit codes)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from stack.problems import ConfigError
from stack.reader import load_files
from tools.status.context import ContextMissing, check, stack_context
from tools.status.row import run_facts
from tools.status.sources import (BucketProgress, ClusterUnreachable, KubeCluster, LocalProgress, NotDeployed,
                                  from_dump)
from tools.status.table import render_details, render_table, rows

EX_NOINPUT, EX_UNAVAILABLE, EX_CONFIG = 66, 69, 78
ROOT = Path(__file__).resolve().parents[2]
DESCRIPTION = "Where each run of a stack is, what it has done and cost."


def _parse(argv):
    parser = argparse.ArgumentParser(prog="python -m tools.status", description=DESCRIPTION)
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
    progress = (LocalProgress(args.progress_dir, config.stack) if args.progress_dir
                else BucketProgress(config.data_bucket, config.project, config.stack))
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
