"""python -m tools.doctor --stack <stack> [--root DIR] [--record FILE | --answers FILE] (tools/doctor/__init__.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from stack.problems import ConfigError
from stack.reader import load_files
from tools.doctor.answers import Live, Recorded
from tools.doctor.checks import MISS, Finding
from tools.doctor.stack_checks import all_findings

ROOT = Path(__file__).resolve().parents[2]
EX_FIX, EX_CONFIG = 1, 78


def report(stack: str, found: list[Finding]) -> list[str]:
    width = max(len(f.check) for f in found)
    lines = [f"make doctor STACK={stack}: what its first `pulumi up` needs (read only: nothing was changed)"]
    for f in found:
        lines.append(f"  {f.status:<4}  {f.check:<{width}}  {f.detail}")
        if f.fix and f.status != "ok":
            lines.append(f"  {'':<4}  {'':<{width}}  fix: {f.fix}")
    misses = sum(1 for f in found if f.status == MISS)
    lines.append(f"{misses} of {len(found)} checks need you" if misses else f"all {len(found)} checks pass or do not apply")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.doctor", description=__doc__)
    parser.add_argument("--stack", required=True)
    parser.add_argument("--root", type=Path, default=ROOT, help="the directory of Pulumi.yaml and the stack file")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--record", type=Path, help="also write every answer to FILE (tokens replaced)")
    source.add_argument("--answers", type=Path, help="replay answers recorded earlier instead of asking")
    args = parser.parse_args(argv)
    try:
        config = load_files(args.stack, args.root)
    except (ConfigError, FileNotFoundError) as err:
        print(f"doctor: stack {args.stack}: {err}", file=sys.stderr)
        return EX_CONFIG
    answers = Recorded(args.answers) if args.answers else Live()
    found = all_findings(answers, config, args.root)
    print("\n".join(report(args.stack, found)))
    if args.record:
        answers.record(args.record)
    return EX_FIX if any(f.status == MISS for f in found) else 0


if __name__ == "__main__":
    sys.exit(main())
