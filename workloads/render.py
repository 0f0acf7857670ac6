"""Render a stack's runs to YAML, one file per run, from the dicts Pulumi applies.

    python -m workloads.render --stack dev --out build/manifests/dev
    python -m workloads.render --examples --out build/manifests/examples
    python -m workloads.render --update-goldens     # rewrite tests/golden/
    python -m workloads.render --stack dev --explode-jobs --out plan/scan/dev/jobs

The goldens under tests/golden/<stack>/ are these files for every shipped
stack (Pulumi.<stack>.yaml) and for workloads/examples.py; review their diff
like code.

A trainer image that `pulumi up` builds (one the stack file does not pin
under `images:`) has no digest before it is pushed. Rendered offline, it is
`<registry>/<image>@sha256:000…0` (`UNBUILT_DIGEST`), at the stack's real
registry address: the manifest is otherwise exactly the applied one, and it
does not change with every edit of a trainer's code (`make plan` shows the
content tag that does).

`--explode-jobs` writes, instead of each JobSet, the batch/v1 Job of each of
its replicated jobs (`child_jobs`), for `make scan`: checkov does not know the
JobSet kind and would check nothing inside its pod template.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path

import yaml

from infra.ids import registry_url
from infra.imagespec import TRAINER_IMAGES
from infra.scheduling import SchedulingContract
from workloads import examples
from workloads.jobset import child_jobs
from workloads.manifests import PlatformFacts, RunError, build_runs
from workloads.spec import RunConfig

ROOT = Path(__file__).resolve().parent.parent
GOLDEN_DIR = ROOT / "tests" / "golden"
EXAMPLES = "examples"
PROJECT = "gke-finetune"
# Stands in for the digest of an image that is built on `pulumi up`.
UNBUILT_DIGEST = "sha256:" + "0" * 64


def to_yaml(manifest: Mapping) -> str:
    # Key order is the builders' order, which reads top-down like a manifest.
    return yaml.safe_dump(dict(manifest), sort_keys=False, default_flow_style=False, width=120)


def write_manifests(manifests: Mapping[str, Mapping], out_dir: Path) -> list[Path]:
    """Write <run>.yaml for each manifest, removing files of runs that no longer exist."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob("*.yaml"):
        if stale.stem not in manifests:
            stale.unlink()
    paths = []
    for name, manifest in sorted(manifests.items()):
        path = out_dir / f"{name}.yaml"
        path.write_text(to_yaml(manifest))
        paths.append(path)
    return paths


def explode_jobs(manifests: Mapping[str, Mapping]) -> dict[str, dict]:
    """The child Jobs of every JobSet in `manifests`."""
    return {name: job for manifest in manifests.values() for name, job in child_jobs(manifest).items()}


def example_manifests() -> dict[str, dict]:
    return build_runs(examples.RUNS, examples.CONTRACTS, examples.FACTS)


def stack_inputs(stack: str) -> tuple[tuple[RunConfig, ...], dict[str, SchedulingContract], PlatformFacts]:
    """(runs, contracts, facts) of Pulumi.<stack>.yaml, read offline as the program reads it."""
    from infra.config import StackConfig  # noqa: PLC0415 (infra.config imports workloads.spec)
    from infra.scheduling import derive_contracts  # noqa: PLC0415

    raw = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text()).get("config") or {}
    values = {"stack": stack}
    for key, value in raw.items():
        namespace, _, name = key.partition(":")
        if namespace == "gcp" and name in ("project", "region"):
            values[name] = value
        elif namespace == PROJECT and name != "hfToken":
            values[name] = value
    config = StackConfig.from_mapping(values)
    facts = PlatformFacts(bucket=config.data_bucket, images=stack_images(config))
    return config.runs, derive_contracts(config), facts


def stack_images(config) -> dict[str, str]:
    """Each trainer's image as the program gives it to the runs: pinned, or built (see UNBUILT_DIGEST)."""
    registry = registry_url(config.region, config.project, config.registry_name)
    built = {
        run.trainer: f"{registry}/{TRAINER_IMAGES[run.trainer].image_name}@{UNBUILT_DIGEST}"
        for run in config.runs
        if not run.image
    }
    return {**built, **config.images.by_trainer()}


def stack_manifests(stack: str) -> dict[str, dict]:
    return build_runs(*stack_inputs(stack))


def shipped_stacks() -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in ROOT.glob("Pulumi.*.yaml"))


def manifests_for(stack: str) -> dict[str, dict]:
    return example_manifests() if stack == EXAMPLES else stack_manifests(stack)


def update_goldens() -> list[Path]:
    paths = []
    for stack in [EXAMPLES, *shipped_stacks()]:
        paths += write_manifests(manifests_for(stack), GOLDEN_DIR / stack)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workloads.render", description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--stack", help="render the runs of Pulumi.<stack>.yaml")
    which.add_argument("--examples", action="store_true", help="render workloads/examples.py")
    which.add_argument("--update-goldens", action="store_true", help="rewrite tests/golden/ for every stack")
    parser.add_argument("--out", type=Path, help="output directory (with --stack or --examples)")
    parser.add_argument(
        "--explode-jobs", action="store_true", help="write each JobSet's child Jobs (batch/v1) instead, for scanners"
    )
    args = parser.parse_args(argv)
    try:
        if args.update_goldens:
            if args.explode_jobs:
                parser.error("--explode-jobs goes with --stack or --examples")
            paths = update_goldens()
        else:
            if args.out is None:
                parser.error("--out is required with --stack or --examples")
            manifests = manifests_for(EXAMPLES if args.examples else args.stack)
            paths = write_manifests(explode_jobs(manifests) if args.explode_jobs else manifests, args.out)
    except RunError as err:
        print(err, file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
