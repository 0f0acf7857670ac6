"""The goldens under tests/golden/: every shipped stack's runs, and the examples.

    python -m tests.support.goldens     # make golden: rewrite them; review the diff like code

tests/golden/<stack>/<run>.yaml is what tools/render.py renders for
Pulumi.<stack>.yaml, tests/golden/<stack>/kueue/<kind>-<name>.yaml its
Kueue objects (none for a stack without Kueue), and
tests/golden/<stack>/compute-classes/<kind>-<name>.yaml its ComputeClasses
(Autopilot ladders only), tests/golden/<stack>/serve/<kind>-<name>.yaml its model
server's objects (`serve:` only), tests/golden/<stack>/ladder/<kind>-<name>.yaml its ladder controller's
(a ladder run Kueue admits); tests/golden/examples/
renders tests/support/examples.py, one run of every manifest shape the
platform builds.
"""

from __future__ import annotations

import sys
from pathlib import Path

from manifests.run import build_runs
from tests.support import examples
from tools.render import (ROOT, shipped_stacks, stack_compute_class_manifests, stack_kueue_manifests, stack_ladder_manifests,
                          stack_manifests, stack_serve_manifests, staging_manifests, write_manifests)

GOLDEN_DIR = ROOT / "tests" / "golden"
EXAMPLES = "examples"
DATASETS = "datasets"
KUEUE = "kueue"
COMPUTE_CLASSES = "compute-classes"
SERVE = "serve"
LADDER = "ladder"


def example_manifests() -> dict[str, dict]:
    return build_runs(examples.RUNS, examples.CONTRACTS, examples.FACTS)


def manifests_for(stack: str) -> dict[str, dict]:
    return example_manifests() if stack == EXAMPLES else stack_manifests(stack)


def staging_for(stack: str) -> dict[str, dict]:
    """The stack's dataset staging Jobs (tests/golden/<stack>/datasets/)."""
    return {} if stack == EXAMPLES else staging_manifests(stack)


def kueue_manifests_for(stack: str) -> dict[str, dict]:
    return {} if stack == EXAMPLES else stack_kueue_manifests(stack)


def compute_class_manifests_for(stack: str) -> dict[str, dict]:
    return {} if stack == EXAMPLES else stack_compute_class_manifests(stack)


def ladder_manifests_for(stack: str) -> dict[str, dict]:
    return {} if stack == EXAMPLES else stack_ladder_manifests(stack)


def serve_manifests_for(stack: str) -> dict[str, dict]:
    """The model server's objects: the stack's (`serve:`), or the examples' GPU and TPU servers."""
    return examples.serve_manifests() if stack == EXAMPLES else stack_serve_manifests(stack)


def update_goldens() -> list[Path]:
    paths = []
    for stack in [EXAMPLES, *shipped_stacks()]:
        paths += write_manifests(manifests_for(stack), GOLDEN_DIR / stack, whole_folder=True)
        paths += write_manifests(staging_for(stack), GOLDEN_DIR / stack / DATASETS, whole_folder=True)
        for sub, objects in ((KUEUE, kueue_manifests_for(stack)), (COMPUTE_CLASSES, compute_class_manifests_for(stack)),
                             (SERVE, serve_manifests_for(stack)), (LADDER, ladder_manifests_for(stack))):
            sub_dir = GOLDEN_DIR / stack / sub
            if objects or sub_dir.is_dir():
                paths += write_manifests(objects, sub_dir, whole_folder=True)
            if sub_dir.is_dir() and not any(sub_dir.iterdir()):
                sub_dir.rmdir()
    return paths


def main() -> int:
    for path in update_goldens():
        print(path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
