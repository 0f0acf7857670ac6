"""Render a stack's runs to YAML, one file per run, from the dicts Pulumi applies.

    python -m tools.render --stack dev --out build/manifests/dev
    python -m tools.render --stack dev --explode-jobs --out plan/scan/dev/jobs

The stack file is read by the one reader (stack/reader.py), the images are
the ones the program gives the runs (stack/images.py: pinned, or built with
`UNBUILT_DIGEST` offline), and the manifests come from the same builders
(manifests/run.py) the Runs component applies. The goldens under
tests/golden/ are these files (`make golden`, tests/support/goldens.py).

`--explode-jobs` writes, instead of each JobSet, the batch/v1 Job of each of
its replicated jobs (`child_jobs`), for `make scan`: checkov does not know the
JobSet kind and would check nothing inside its pod template. `--kueue` writes
the stack's Kueue objects instead (manifests/kueue.py), one `<kind>-<name>.yaml`
each; none for a stack without Kueue. `--compute-classes` writes an Autopilot
stack's ComputeClasses, one per capacity ladder (manifests/compute_class.py). `--serve` writes the
model server's Deployment, Service and PriorityClass (`serve:`, manifests/serving.py). `--ladder` writes the
ladder controller's objects (manifests/ladder.py), where a run Kueue admits has a ladder.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path

from admission.serving import serve_manifests
from core.contract import SchedulingContract
from manifests.staging import stack_staging_jobs
from manifests.jobset import child_jobs
from manifests.compute_class import compute_class_manifests
from manifests.kueue import kueue_manifests
from manifests.ladder import controller_manifests
from manifests.run import PlatformFacts, build_runs, platform_facts
from stack import reader
from stack.images import offline_images
from stack.config import StackConfig
from stack.problems import ConfigError
from stack.runs import RunConfig
from tools import stacks
from tools.cli import guarded, stack_name
from tools.files import WriteRefused
from tools.yaml_files import to_yaml, write_manifests

__all__ = ["compute_class_objects", "config_inputs", "explode_jobs", "kueue_objects", "ladder_objects", "run_manifests",
           "serve_objects", "stack_compute_class_manifests", "stack_inputs", "stack_kueue_manifests",
           "stack_ladder_manifests", "stack_manifests", "stack_serve_manifests", "staging_jobs", "to_yaml",
           "write_manifests"]

ROOT = Path(__file__).resolve().parent.parent


def explode_jobs(manifests: Mapping[str, Mapping]) -> dict[str, dict]:
    """The child Jobs of every JobSet in `manifests`."""
    return {name: job for manifest in manifests.values() for name, job in child_jobs(manifest).items()}


def config_inputs(config: StackConfig) -> tuple[tuple[RunConfig, ...], dict[str, SchedulingContract], PlatformFacts]:
    """(runs, contracts, facts) of a validated stack, with the images the program gives its runs."""
    return config.runs, config.contracts(), platform_facts(config, offline_images(config))


def run_manifests(config: StackConfig) -> dict[str, dict]:
    """Each run's JobSet by run name."""
    return build_runs(*config_inputs(config))


def staging_jobs(config: StackConfig) -> dict[str, dict]:
    """The staging Job of each dataset of the stack, by Job name."""
    return {job["metadata"]["name"]: job for job in stack_staging_jobs(config, offline_images(config)).values()}


def kueue_objects(config: StackConfig) -> dict[str, dict]:
    """The stack's Kueue objects by `<kind>-<name>`; empty when the stack installs no Kueue."""
    return kueue_manifests(config.kueue_flavors())


def ladder_objects(config: StackConfig) -> dict[str, dict]:
    """The stack's ladder controller's objects by `<kind>-<name>` (manifests/ladder.py); empty without a ladder
    run Kueue admits."""
    return controller_manifests(config)


def serve_objects(config: StackConfig) -> dict[str, dict]:
    """The model server's objects by `<kind>-<name>` (admission/serving.py, the builders components/serving.py
    applies); empty without `serve:`."""
    return serve_manifests(config)


def compute_class_objects(config: StackConfig) -> dict[str, dict]:
    """The stack's ComputeClasses by `<kind>-<name>`; empty but for Autopilot ladders."""
    return compute_class_manifests(config.compute_classes())


# Of Pulumi.<stack>.yaml, read (and so checked) once by the one reader, for callers with a stack's name only.


def stack_inputs(
    stack: str, root: Path = ROOT
) -> tuple[tuple[RunConfig, ...], dict[str, SchedulingContract], PlatformFacts]:
    return config_inputs(reader.load_files(stack, root))


def stack_manifests(stack: str, root: Path = ROOT) -> dict[str, dict]:
    return run_manifests(reader.load_files(stack, root))


def staging_manifests(stack: str, root: Path = ROOT) -> dict[str, dict]:
    return staging_jobs(reader.load_files(stack, root))


def stack_kueue_manifests(stack: str, root: Path = ROOT) -> dict[str, dict]:
    return kueue_objects(reader.load_files(stack, root))


def stack_ladder_manifests(stack: str, root: Path = ROOT) -> dict[str, dict]:
    return ladder_objects(reader.load_files(stack, root))


def stack_compute_class_manifests(stack: str, root: Path = ROOT) -> dict[str, dict]:
    return compute_class_objects(reader.load_files(stack, root))


def stack_serve_manifests(stack: str, root: Path = ROOT) -> dict[str, dict]:
    return serve_objects(reader.load_files(stack, root))


def shipped_stacks(root: Path = ROOT) -> list[str]:
    """Every shipped stack (tools/stacks.py `SHIPPED`), existing-cluster ones included: the goldens' stacks."""
    return stacks.shipped(root)


def main(argv: list[str] | None = None) -> int:
    return guarded("render", lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.render", description=__doc__.splitlines()[0])
    parser.add_argument("--stack", required=True, type=stack_name, help="render the runs of Pulumi.<stack>.yaml")
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument(
        "--explode-jobs", action="store_true", help="write each JobSet's child Jobs (batch/v1) instead, for scanners"
    )
    parser.add_argument("--kueue", action="store_true", help="write the stack's Kueue objects instead")
    parser.add_argument("--compute-classes", action="store_true",
                        help="write the stack's ComputeClasses (Autopilot ladders) instead")
    parser.add_argument("--serve", action="store_true", help="write the stack's model server objects (serve:) instead")
    parser.add_argument("--ladder", action="store_true", help="write the stack's ladder controller's objects instead")
    args = parser.parse_args(argv)
    try:
        config = reader.load_files(args.stack, ROOT)
    except ConfigError as err:
        print(err, file=sys.stderr)
        return 1
    if args.serve:
        manifests = serve_objects(config)
    elif args.ladder:
        manifests = ladder_objects(config)
    elif args.compute_classes:
        manifests = compute_class_objects(config)
    else:
        manifests = kueue_objects(config) if args.kueue else run_manifests(config)
    # For scanners, every Job the stack declares: each run's child Jobs and the staging Jobs.
    chosen = {**explode_jobs(manifests), **staging_jobs(config)} if args.explode_jobs else manifests
    try:
        written = write_manifests(chosen, args.out)
    except WriteRefused as err:
        print(f"render: {err}", file=sys.stderr)
        return err.code
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
