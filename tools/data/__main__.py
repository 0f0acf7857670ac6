"""python -m tools.data check --stack s --run r [--tokenizer DIR] [--json] [--limit N] [--examples N] [--quiet]

Exit codes: 0 every row reads as the run's format (warnings may stand); 65 bad rows; 66 no such run
(or no such stack file, or no tokenizer in --tokenizer DIR); 69 the run's data is not on this machine (staged in the cluster, or a file
this machine can't read); 78 the stack's settings are refused.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tools.data.check import EX_CONFIG, EX_NOINPUT, check
from tools.data.show import render

ROOT = Path(__file__).resolve().parents[2]


def _parse(argv):
    parser = argparse.ArgumentParser(prog="python -m tools.data", description="A run's data, checked here.")
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="every row of a run's data as its trainer will read it")
    c.add_argument("--stack", required=True)
    c.add_argument("--run", required=True)
    c.add_argument("--json", action="store_true", help="the report as JSON on stdout")
    c.add_argument("--limit", type=int, default=20, help="bad rows listed (then a count)")
    c.add_argument("--examples", type=int, default=3, help="examples shown with their trained text marked")
    c.add_argument("--quiet", action="store_true", help="no progress bar")
    c.add_argument("--tokenizer", type=Path, metavar="DIR",
                   help="a Hugging Face tokenizer directory (default: the run's model in the local Hugging Face cache)")
    c.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _load(stack: str, root: Path):
    from stack.problems import ConfigError  # pylint: disable=import-outside-toplevel
    from stack.reader import load_files  # pylint: disable=import-outside-toplevel

    if not (root / f"Pulumi.{stack}.yaml").is_file():
        return f"stack {stack}: no stack file Pulumi.{stack}.yaml in {root}", EX_NOINPUT
    try:
        return load_files(stack, root), 0
    except ConfigError as err:
        return f"stack {stack}: {err}", EX_CONFIG


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    config, code = _load(args.stack, args.root)
    if code:
        print(f"check-data: {config}", file=sys.stderr)
        return code
    from tqdm import tqdm  # pylint: disable=import-outside-toplevel

    with tqdm(unit=" rows", disable=args.quiet or not sys.stderr.isatty(), desc=args.run) as bar:
        code, report = check(config, args.run, args.limit, args.examples, progress=bar.update, root=args.root,
                             tokenizer=args.tokenizer)
    if args.json:
        print(json.dumps(report, indent=2))
    elif "error" in report:
        print(f"check-data: {report['error']}", file=sys.stderr)
    else:
        print(render(report, color=sys.stdout.isatty()))
    return code


if __name__ == "__main__":
    sys.exit(main())
