"""python -m tools.migrate --stack <stack> [--run <run>] [--delete-source] [--root DIR] (tools/migrate/__init__.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from stack.problems import ConfigError
from stack.reader import load_files
from tools.migrate.copy import Migration, Outcome
from tools.migrate.plan import moves

ROOT = Path(__file__).resolve().parents[2]
EX_AGAIN, EX_CONFIG = 1, 78


def _bucket(config):
    from google.cloud import storage  # pylint: disable=import-outside-toplevel

    return storage.Client(project=config.project).bucket(config.data_bucket)


def report(outcome: Outcome, deleting: bool) -> list[str]:
    lines = [f"migrate: {len(outcome.copied)} copied and verified, {len(outcome.verified)} there already and verified"]
    lines += [f"  left alone, there with other content: {name}" for name in outcome.conflicts]
    lines += [f"  failed: {why}" for why in outcome.failed]
    if outcome.deleted:
        lines.append(f"migrate: {len(outcome.deleted)} source objects deleted, as asked")
    elif deleting and not outcome.ok:
        lines.append("migrate: no source object deleted: not every copy is verified")
    if not outcome.ok:
        lines.append("migrate: run it again to copy what failed (what is verified is not copied again); an object "
                     "left alone was written in the new place since, and is kept")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.migrate", description=__doc__)
    parser.add_argument("--stack", required=True)
    parser.add_argument("--run", help="one run (default: every run and dataset of the stack)")
    parser.add_argument("--delete-source", action="store_true", help="delete the old objects once all are verified")
    parser.add_argument("--root", type=Path, default=ROOT, help="the directory of Pulumi.yaml and the stack file")
    args = parser.parse_args(argv)
    try:
        config = load_files(args.stack, args.root)
    except (ConfigError, FileNotFoundError) as err:
        print(f"migrate: stack {args.stack}: {err}", file=sys.stderr)
        return EX_CONFIG
    if args.run and args.run not in {r.name for r in config.runs}:
        print(f"migrate: {args.run!r} is not a run of stack {args.stack}; runs: "
              f"{', '.join(r.name for r in config.runs) or '(none)'}", file=sys.stderr)
        return EX_CONFIG
    planned = moves(config, args.run)
    for move in planned:
        print(f"migrate: {move.what}: gs://{config.data_bucket}/{move.source}/ -> {move.destination}/")
    try:
        outcome = Migration(_bucket(config), planned).run(sys.stderr, args.delete_source)
    except Exception as err:  # pylint: disable=broad-except  # no credentials, no bucket: one line, no traceback
        print(f"migrate: gs://{config.data_bucket} cannot be read: {type(err).__name__}: {err}", file=sys.stderr)
        return EX_AGAIN
    print("\n".join(report(outcome, args.delete_source)))
    return 0 if outcome.ok else EX_AGAIN


if __name__ == "__main__":
    sys.exit(main())
