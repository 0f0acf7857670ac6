"""python -m tools.plan {show,json,diff,handoff} --stack <stack> [--secret KEY] ... (tools/plan/__init__.py)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from tools.backend import deployed_from_local
from tools.plan.collect import ROOT, PlanError, collect
from tools.plan.diff import diff, render_diff
from tools.plan.ref import plan_json, plan_ref
from tools.plan.show import render, write_manifests

EX_CONFIG = 78  # an invalid stack file, or one that is not for an existing cluster
DESCRIPTION = "The offline plan: what `pulumi up` would declare for a stack, with no CLI and no credentials."


def _use_root(root: Path) -> None:
    """Make `root`'s project modules the ones imported (this tree's tools stay loaded)."""
    sys.path.insert(0, str(ROOT))
    import tools.offline  # noqa: F401,PLC0415 (loaded from this tree before the switch)

    sys.path[:] = [str(root)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.plan", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)
    secret = {"action": "append", "default": [], "metavar": "KEY",
              "help": "plan as if this secret key of the project were set; repeatable"}
    show = sub.add_parser("show", help="print the plan of a stack and write its run manifests")
    show.add_argument("--stack", required=True)
    show.add_argument("--secret", **secret)
    show.add_argument("--out", type=Path, help="manifests directory (default: plan/<stack>/manifests)")
    show.add_argument("--json", type=Path, help="also write the plan as JSON here")
    js = sub.add_parser("json", help="print the plan as JSON (for diff)")
    js.add_argument("--stack", required=True)
    js.add_argument("--root", type=Path, default=ROOT)
    js.add_argument("--secret", **secret)
    df = sub.add_parser("diff", help="what a change adds, removes and modifies against a git ref")
    df.add_argument("--stack", required=True)
    df.add_argument("--base", required=True, help="git ref to compare with, e.g. origin/main")
    df.add_argument("--secret", **secret)
    ho = sub.add_parser("handoff", help="what a platform team applies for an existing-cluster stack: RBAC, IAM, "
                                         "firewall rule")
    ho.add_argument("--stack", required=True)
    ho.add_argument("--user", action="append", default=[], help="a Google account that deploys it; repeatable")
    ho.add_argument("--group", action="append", default=[], help="a Google group that deploys it; repeatable")
    ho.add_argument("--service-account", action="append", default=[], help="a service account that deploys it")
    ho.add_argument("--out", type=Path, help="also write rbac.yaml and gcloud.sh here")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    root = args.root.resolve() if args.command == "json" else ROOT
    _use_root(root)
    os.chdir(root)  # the CLI runs the program in the project directory
    if args.command == "json":
        try:
            print(json.dumps(collect(args.stack, root, tuple(args.secret)), sort_keys=True))
        except PlanError as err:  # an invalid stack is a result, not a failure of the tool
            print(json.dumps({"stack": args.stack, "errors": err.problems}))
        return 0
    if args.command == "show":
        return _show(args)
    if args.command == "handoff":
        return _handoff(args)
    return _diff(args)


def _show(args: argparse.Namespace) -> int:
    warning = deployed_from_local(args.stack, ROOT)
    if warning:
        print(f"{warning}\n")
    try:
        plan = collect(args.stack, ROOT, tuple(args.secret))
    except PlanError as err:
        if err.unreadable:
            print(f"{err.problems[0]} (stack {args.stack}: nothing planned)", file=sys.stderr)
            return 1
        print(f"Stack {args.stack} is invalid; nothing would be declared:", file=sys.stderr)
        for problem in err.problems:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    print(render(plan))
    out = (args.out or ROOT / "plan" / args.stack / "manifests").resolve()
    written = write_manifests(plan, out)
    shown = out.relative_to(ROOT) if out.is_relative_to(ROOT) else out
    print(f"\nRun manifests ({len(written)}) written to {shown}/")
    if args.json:
        args.json.write_text(json.dumps(plan, indent=2, sort_keys=True))
    return 0


def _handoff(args: argparse.Namespace) -> int:
    from stack.problems import ConfigError  # noqa: PLC0415 (after _use_root, the tree's own)
    from tools.plan.handoff import PLACEHOLDER, Subjects, handoff, write  # noqa: PLC0415

    given = Subjects(tuple(args.user), tuple(args.group), tuple(args.service_account))
    try:
        found = handoff(args.stack, ROOT, given if given != Subjects() else PLACEHOLDER)
    except (ConfigError, FileNotFoundError) as err:
        print(f"handoff: stack {args.stack}: {err}", file=sys.stderr)
        return EX_CONFIG
    print(found.text())
    if args.out:
        for path in write(found, args.out):
            print(f"# written: {path}", file=sys.stderr)
    return 0


def _diff(args: argparse.Namespace) -> int:
    head = plan_json(args.stack, ROOT, tuple(args.secret))
    base = plan_ref(args.stack, args.base, tuple(args.secret))
    for label, result in ((args.base, base), ("working tree", head)):
        if result.get("errors"):
            print(f"Stack {args.stack} at {label} is invalid:")
            print("\n".join(f"  - {p}" for p in result["errors"]))
            if result is head:
                return 1
    print(render_diff(diff(None if base.get("errors") else base, head), args.stack, args.base))
    return 0


if __name__ == "__main__":
    sys.exit(main())
