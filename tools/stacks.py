"""A checkout's stack files: the shipped ones, a user's own, which a change affects, which CI deploys.

    python -m tools.stacks shipped                         # the shipped stacks, one per line
    python -m tools.stacks deployed                        # ["prod"]
    python -m tools.stacks affected --base origin/main     # every stack a change can alter
    python -m tools.stacks affected --base origin/main --deployed      # ... that CI deploys
    python -m tools.stacks affected --base origin/main --not-deployed  # ... that it doesn't
    python -m tools.stacks region prod                     # us-east5 (the stack's gcp:region)

Standard library only: the workflows run it before any environment exists.
A change to a stack file affects that stack; a change to anything the program
reads (the program, core/, stack/, manifests/, components/, trainers/, docker/, Pulumi.yaml,
requirements.txt) affects every stack; documentation, tests and CI files
affect none.

The repository ships the stacks named in `SHIPPED` (its examples: the tests,
the goldens, the e2e and the scan take these and no others). Every other
`Pulumi.<name>.yaml` of a checkout is a user's own stack file: planned and
validated like the shipped ones (tests/tools/test_own_stack_files.py), never
compared with a golden. `stack_files` lists both, for every tool that works
on all stack files of a checkout.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEPLOYED_FILE = "deploy/stacks.txt"
_STACK_FILE = re.compile(r"^Pulumi\.(?P<stack>[^/]+)\.yaml$")
# Paths that cannot change what any stack declares.
_INERT = re.compile(r"^(tests/|\.github/|deploy/|\.ci/|docs/|tools/|[^/]+\.md$|\.gitignore$|pyproject\.toml$|Makefile$|LICENSE)")


# The stack files this repository ships, by stack name.
SHIPPED = ("a4", "autopilot", "dev", "existing-dev", "tpu-multihost", "tpu-multislice", "tpu-queued")


def stack_files(root: Path = ROOT) -> dict[str, Path]:
    """Every stack file of the checkout at `root`, shipped and the user's own, by stack name (sorted)."""
    found = {m.group("stack"): p for p in root.glob("Pulumi.*.yaml") if (m := _STACK_FILE.fullmatch(p.name))}
    return dict(sorted(found.items()))


def shipped(root: Path = ROOT) -> list[str]:
    """The shipped stacks whose file the checkout at `root` holds."""
    return [name for name in SHIPPED if (root / f"Pulumi.{name}.yaml").is_file()]


def own(root: Path = ROOT) -> list[str]:
    """The user's own stacks: every stack file of the checkout but the shipped ones."""
    return [name for name in stack_files(root) if name not in SHIPPED]


def deployed(root: Path = ROOT) -> list[str]:
    """Stacks listed in deploy/stacks.txt; each must have its stack file."""
    path = root / DEPLOYED_FILE
    names = []
    for line in path.read_text().splitlines() if path.exists() else []:
        name = line.split("#", 1)[0].strip()
        if name:
            names.append(name)
    missing = [n for n in names if not (root / f"Pulumi.{n}.yaml").is_file()]
    if missing:
        raise SystemExit(f"{DEPLOYED_FILE} lists stacks without a stack file: {missing}")
    return names


def affected_by(changed: list[str], stacks: list[str]) -> list[str]:
    """The stacks (of `stacks`) that a change to the `changed` paths can alter."""
    hit: set[str] = set()
    for path in changed:
        match = _STACK_FILE.fullmatch(path)
        if match:
            hit.add(match.group("stack"))
        elif not _INERT.match(path):
            return sorted(stacks)
    return sorted(hit & set(stacks))


def changed_files(base: str, root: Path = ROOT) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(root), "diff", "--name-only", f"{base}...HEAD"],
        check=True, capture_output=True, text=True,
    ).stdout
    return [line for line in out.splitlines() if line]


def region(stack: str, root: Path = ROOT) -> str:
    text = (root / f"Pulumi.{stack}.yaml").read_text()
    match = re.search(r"^\s*gcp:region:\s*[\"']?([a-z0-9-]+)", text, re.M)
    if not match:
        raise SystemExit(f"Pulumi.{stack}.yaml sets no gcp:region")
    return match.group(1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.stacks", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("shipped")
    sub.add_parser("deployed")
    aff = sub.add_parser("affected")
    aff.add_argument("--base", required=True)
    which = aff.add_mutually_exclusive_group()
    which.add_argument("--deployed", action="store_true")
    which.add_argument("--not-deployed", action="store_true")
    reg = sub.add_parser("region")
    reg.add_argument("stack")
    args = parser.parse_args(argv)

    if args.command == "shipped":
        print("\n".join(shipped()))
    elif args.command == "deployed":
        print(json.dumps(deployed()))
    elif args.command == "region":
        print(region(args.stack))
    else:
        # A user's own stack files count: a fork deploys and previews its own stacks.
        stacks = affected_by(changed_files(args.base), list(stack_files()))
        if args.deployed:
            stacks = [s for s in stacks if s in deployed()]
        elif args.not_deployed:
            stacks = [s for s in stacks if s not in deployed()]
        print(json.dumps(stacks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
