"""The goldens under tests/golden/: every shipped stack's runs, and the examples.

    python -m tests.support.goldens     # make golden: rewrite them; review the diff like code

tests/golden/<stack>/<run>.yaml is what tools/render.py renders for
Pulumi.<stack>.yaml, and tests/golden/<stack>/kueue/<kind>-<name>.yaml its
Kueue objects (none for a stack without Kueue); tests/golden/examples/
renders tests/support/examples.py, one run of every manifest shape the
platform builds.
"""

from __future__ import annotations

import sys
from pathlib import Path

from manifests.run import build_runs
from tests.support import examples
from tools.render import ROOT, shipped_stacks, stack_kueue_manifests, stack_manifests, staging_manifests, write_manifests

GOLDEN_DIR = ROOT / "tests" / "golden"
EXAMPLES = "examples"
DATASETS = "datasets"
KUEUE = "kueue"


def example_manifests() -> dict[str, dict]:
    return build_runs(examples.RUNS, examples.CONTRACTS, examples.FACTS)


def manifests_for(stack: str) -> dict[str, dict]:
    return example_manifests() if stack == EXAMPLES else stack_manifests(stack)


def staging_for(stack: str) -> dict[str, dict]:
    """The stack's dataset staging Jobs (tests/golden/<stack>/datasets/)."""
    return {} if stack == EXAMPLES else staging_manifests(stack)


def kueue_manifests_for(stack: str) -> dict[str, dict]:
    return {} if stack == EXAMPLES else stack_kueue_manifests(stack)


def update_goldens() -> list[Path]:
    paths = []
    for stack in [EXAMPLES, *shipped_stacks()]:
        paths += write_manifests(manifests_for(stack), GOLDEN_DIR / stack)
        paths += write_manifests(staging_for(stack), GOLDEN_DIR / stack / DATASETS)
        kueue_dir = GOLDEN_DIR / stack / KUEUE
        if kueue_manifests_for(stack) or kueue_dir.is_dir():
            paths += write_manifests(kueue_manifests_for(stack), kueue_dir)
        if kueue_dir.is_dir() and not any(kueue_dir.iterdir()):
            kueue_dir.rmdir()
    return paths


def main() -> int:
    for path in update_goldens():
        print(path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
