"""python -m tools.runs {logs,cancel,resume,inspect,wait} --stack <stack> [--run <run>] ... (tools/runs/__init__.py)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tools.runs import commands as cmd

ROOT = Path(__file__).resolve().parents[2]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.runs", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--stack", required=True)
    common.add_argument("--run", help="the run (default: the stack's only run)")
    common.add_argument("--root", type=Path, default=ROOT, help="the directory of Pulumi.yaml and the stack file")
    common.add_argument("--context", help="kubeconfig context (default: the stack's own cluster's)")
    logs = sub.add_parser("logs", parents=[common], help="the trainer's log")
    logs.add_argument("--follow", action="store_true", help="stream it, across restarts, until the run ends")
    logs.add_argument("--pod", default="0", help="a process index, or all (default 0)")
    logs.add_argument("--tail", type=int, help="only the last N lines (without --follow)")
    for name, words in (("cancel", "stop the run: suspend: true in the stack file, applied"),
                        ("resume", "start it again: suspend removed from the stack file, applied")):
        one = sub.add_parser(name, parents=[common], help=words)
        one.add_argument("--edit-only", action="store_true", help="edit the stack file; apply it later (make up)")
    inspect = sub.add_parser("inspect", parents=[common], help="one folder with what debugging the run needs")
    inspect.add_argument("--out", type=Path, default=Path("inspect"), help="where the folder goes (default inspect/)")
    inspect.add_argument("--progress-dir", help="a directory laid out as the bucket, instead of the bucket")
    wait = sub.add_parser("wait", parents=[common], help="wait until the run ends (make status WAIT=1)")
    wait.add_argument("--timeout", type=float, help="exit 75 when not admitted within SECONDS")
    wait.add_argument("--poll", type=float, default=10.0, help=argparse.SUPPRESS)
    wait.add_argument("--all", action="store_true", help=argparse.SUPPRESS)  # every run (make status without RUN)
    return parser


def logs(args) -> int:
    from tools.runs.logs import Target, follow, show, which_problem  # pylint: disable=import-outside-toplevel

    config = cmd.stack_config(args.stack, args.root, "logs")
    run = cmd.the_run(config, args.run, "logs")
    contract = config.contracts()[run.pool]
    processes = contract.hosts_per_slice * contract.slices
    problem = which_problem(args.pod, processes)
    if problem:
        raise cmd.CommandError(f"logs: {problem}", cmd.EX_USAGE)
    target = Target(run.name, cmd.run_place(config, run.name), contract.hosts_per_slice, processes, args.pod)
    cluster = cmd.connect(config, args.context, "logs")

    def out(line: str) -> None:
        print(line, flush=True)

    body = (lambda: follow(cluster, target, out)) if args.follow else (lambda: show(cluster, target, out, args.tail))
    return cmd.guarded("logs", config, body)


def suspend(args) -> int:
    from tools.runs import suspend as edit  # pylint: disable=import-outside-toplevel

    config = cmd.stack_config(args.stack, args.root, args.command)
    run = cmd.the_run(config, args.run, args.command)
    path = args.root / f"Pulumi.{args.stack}.yaml"
    try:
        done = edit.edit(path.read_text(), path, run.name, args.command == "cancel")
    except edit.EditError as err:
        raise cmd.CommandError(f"{args.command}: {err}", cmd.EX_CONFIG) from None
    if done.changed:
        path.write_text(done.text)
    state = "suspend: true" if args.command == "cancel" else "suspend removed"
    print(f"{args.command}: {path.name}:{done.line}: run {run.name}: {state}" + ("" if done.changed else " already"),
          flush=True)
    if args.edit_only:
        print(f"{args.command}: apply it with `make up STACK={args.stack}` (or: {' '.join(edit.apply_command(args.stack, run.name))})")
        return 0
    try:
        code = edit.apply(args.stack, run.name, args.root, dict(os.environ))
    except edit.EditError as err:
        raise cmd.CommandError(f"{args.command}: {err}", cmd.EX_CONFIG) from None
    if code != 0:
        raise cmd.CommandError(f"{args.command}: `pulumi up --target` exited {code}; the stack file keeps the change: "
                               f"`make up STACK={args.stack}` applies it", code)
    return 0


def inspect(args) -> int:
    from tools import render  # pylint: disable=import-outside-toplevel
    from tools.runs.inspect import folder_name, gather  # pylint: disable=import-outside-toplevel
    from tools.status.sources import (  # pylint: disable=import-outside-toplevel
        BucketProgress, LocalProgress, checkpoint_mount)

    config = cmd.stack_config(args.stack, args.root, "inspect")
    run = cmd.the_run(config, args.run, "inspect")
    cluster = cmd.connect(config, args.context, "inspect")
    progress = (LocalProgress(args.progress_dir, config.stack) if args.progress_dir
                else BucketProgress(config.data_bucket, config.project, config.stack))
    declared = render.stack_manifests(args.stack, args.root).get(run.name)
    links = cmd.stack_run_links(config)[run.name]
    status = _status_lines(args, run.name)

    def body() -> int:
        # The record is where the deployed run's checkpoints are (a run deployed before prefixes carried the
        # stack keeps its old ones).
        record = progress.read(run.name, checkpoint_mount(cluster.jobset(run.name)))
        folder = gather(cluster, args.stack, run.name, args.out / folder_name(args.stack, run.name), status, links,
                        record, None if run.name in cmd.withdrawn_runs(config) else declared)
        print(f"inspect: run {run.name} of stack {args.stack} written to {folder}/ (README.txt says what each file is)")
        return 0

    return cmd.guarded("inspect", config, body)


def _status_lines(args, run: str) -> list[str]:
    """`make status`'s details of the run, as it prints them (its first lines if the cluster says less)."""
    import contextlib  # pylint: disable=import-outside-toplevel
    import io  # pylint: disable=import-outside-toplevel

    from tools.status.__main__ import main as status_main  # pylint: disable=import-outside-toplevel

    argv = ["show", "--stack", args.stack, "--run", run, "--root", str(args.root)]
    argv += ["--context", args.context] if args.context else []
    argv += ["--progress-dir", args.progress_dir] if getattr(args, "progress_dir", None) else []
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        status_main(argv)
    return printed.getvalue().splitlines()


def wait(args) -> int:
    from tools.runs.wait import ClusterProbe, wait as wait_for  # pylint: disable=import-outside-toplevel
    from tools.status.row import run_facts  # pylint: disable=import-outside-toplevel

    config = cmd.stack_config(args.stack, args.root, "wait")
    runs = [r.name for r in config.runs] if args.all and not args.run else [cmd.the_run(config, args.run, "wait").name]
    cluster = cmd.connect(config, args.context, "wait")
    probe = ClusterProbe(cluster, run_facts(config), runs, cmd.withdrawn_runs(config), cmd.stack_run_links(config))
    print(f"wait: stack {args.stack}, {cluster.where}, namespace {config.runs_namespace}: "
          f"{', '.join(runs)}", flush=True)
    return wait_for(probe, lambda line: print(line, flush=True), args.timeout, args.poll)


COMMANDS = {"logs": logs, "cancel": suspend, "resume": suspend, "inspect": inspect, "wait": wait}


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    return cmd.finish(lambda: COMMANDS[args.command](args))


if __name__ == "__main__":
    sys.exit(main())
