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
model server's Deployment, Service and PriorityClass (`serve:`, manifests/serving.py).
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
from manifests.run import PlatformFacts, build_runs, platform_facts
from stack import reader
from stack.images import offline_images
from stack.problems import ConfigError
from stack.runs import RunConfig
from tools import stacks
from tools.yaml_files import to_yaml, write_manifests

__all__ = ["explode_jobs", "stack_compute_class_manifests", "stack_serve_manifests", "stack_inputs", "stack_kueue_manifests", "stack_manifests", "to_yaml", "write_manifests"]

ROOT = Path(__file__).resolve().parent.parent


def explode_jobs(manifests: Mapping[str, Mapping]) -> dict[str, dict]:
    """The child Jobs of every JobSet in `manifests`."""
    return {name: job for manifest in manifests.values() for name, job in child_jobs(manifest).items()}


def stack_inputs(
    stack: str, root: Path = ROOT
) -> tuple[tuple[RunConfig, ...], dict[str, SchedulingContract], PlatformFacts]:
    """(runs, contracts, facts) of Pulumi.<stack>.yaml, read as the program reads it."""
    config = reader.load_files(stack, root)
    facts = platform_facts(config, offline_images(config))
    return config.runs, config.contracts(), facts


def stack_manifests(stack: str, root: Path = ROOT) -> dict[str, dict]:
    return build_runs(*stack_inputs(stack, root))


def staging_manifests(stack: str, root: Path = ROOT) -> dict[str, dict]:
    """The staging Job of each dataset of the stack, by Job name (images as `stack_inputs` gives them)."""
    config = reader.load_files(stack, root)
    return {job["metadata"]["name"]: job for job in stack_staging_jobs(config, offline_images(config)).values()}


def stack_kueue_manifests(stack: str, root: Path = ROOT) -> dict[str, dict]:
    """The Kueue objects of Pulumi.<stack>.yaml by `<kind>-<name>`; empty when the stack installs no Kueue."""
    return kueue_manifests(reader.load_files(stack, root).kueue_flavors())


def stack_compute_class_manifests(stack: str, root: Path = ROOT) -> dict[str, dict]:
    """The ComputeClasses of Pulumi.<stack>.yaml by `<kind>-<name>`; empty but for Autopilot ladders."""
    return compute_class_manifests(reader.load_files(stack, root).compute_classes())


def stack_serve_manifests(stack: str, root: Path = ROOT) -> dict[str, dict]:
    """The model server's objects of Pulumi.<stack>.yaml by `<kind>-<name>` (admission/serving.py, the builders
    components/serving.py applies); empty without `serve:`."""
    return serve_manifests(reader.load_files(stack, root))


def shipped_stacks(root: Path = ROOT) -> list[str]:
    """Every shipped stack (tools/stacks.py `SHIPPED`), existing-cluster ones included: the goldens' stacks."""
    return stacks.shipped(root)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.render", description=__doc__.splitlines()[0])
    parser.add_argument("--stack", required=True, help="render the runs of Pulumi.<stack>.yaml")
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument(
        "--explode-jobs", action="store_true", help="write each JobSet's child Jobs (batch/v1) instead, for scanners"
    )
    parser.add_argument("--kueue", action="store_true", help="write the stack's Kueue objects instead")
    parser.add_argument("--compute-classes", action="store_true",
                        help="write the stack's ComputeClasses (Autopilot ladders) instead")
    parser.add_argument("--serve", action="store_true", help="write the stack's model server objects (serve:) instead")
    args = parser.parse_args(argv)
    try:
        if args.serve:
            manifests = stack_serve_manifests(args.stack)
        elif args.compute_classes:
            manifests = stack_compute_class_manifests(args.stack)
        else:
            manifests = stack_kueue_manifests(args.stack) if args.kueue else stack_manifests(args.stack)
    except ConfigError as err:
        print(err, file=sys.stderr)
        return 1
    # For scanners, every Job the stack declares: each run's child Jobs and the staging Jobs.
    chosen = {**explode_jobs(manifests), **staging_manifests(args.stack)} if args.explode_jobs else manifests
    for path in write_manifests(chosen, args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
