"""What a stack file says about one fine-tuning run (the `runs:` list), and its checks.

`validate_runs` is the one place a run is checked against the pools it names;
the stack's config validation calls it so that every problem is reported, one
clear message each, before any resource is declared.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from infra.accelerators import Family
from infra.scheduling import SchedulingContract
from workloads.images import image_problem

TRAINERS = ("gemma-jax", "trl-gpu")

# The accelerator family each trainer is built for.
TRAINER_FAMILY: dict[str, Family] = {"gemma-jax": Family.TPU, "trl-gpu": Family.GPU}

# The one replicated job of every run's JobSet; part of every pod hostname.
REPLICATED_JOB = "trainer"

# Flags the platform passes itself (paths below the run's mounts, the chip's
# peak FLOP/s, the process count). A run that repeats one would silently
# override or be overridden, so it is rejected instead.
PLATFORM_FLAGS: dict[str, frozenset[str]] = {
    "gemma-jax": frozenset({"--data_path", "--checkpoint_dir", "--log_dir", "--peak_flops_per_device"}),
    "trl-gpu": frozenset({"--output_dir", "--logging_dir", "--dataset_name", "--num_processes"}),
}
# Profiling flags the platform passes for `profile: true`; a run asks for
# profiling with that key, not with these flags.
PROFILE_FLAGS: dict[str, frozenset[str]] = {
    "gemma-jax": frozenset({"--profile_steps", "--xprof_port"}),
    "trl-gpu": frozenset(),  # the TRL trainer has no profiler flag: `profile` is refused
}

# Environment variables the manifests set; a run's `env` may not replace them.
RESERVED_ENV = frozenset(
    {
        "HF_HOME",
        "HF_TOKEN_PATH",
        "MEGASCALE_COORDINATOR_ADDRESS",
        "MEGASCALE_NUM_SLICES",
        "MEGASCALE_SLICE_ID",
        "PYTHONUNBUFFERED",
    }
)

# A JobSet name must be a DNS-1035 label (its Jobs' names are), see
# https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#rfc-1035-label-names
_DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_LABEL = 63


class RunConfig(BaseModel):
    """One run: which trainer, on which pool, with which arguments."""

    # camelCase keys in the stack file, like the rest of its config.
    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True)

    name: str = Field(description="DNS-1035 label; names the JobSet and the checkpoint prefix")
    trainer: Literal["gemma-jax", "trl-gpu"]
    pool: str = Field(description="the pool (Standard) or accelerator shape (Autopilot) it runs on")
    args: tuple[str, ...] = Field(default=(), description="trainer flags, passed through verbatim")
    data: str | None = Field(
        default=None,
        description="file or directory below the bucket's datasets/ prefix the trainer reads "
        "(required for gemma-jax; trl-gpu reads its Hub dataset when unset)",
    )
    profile: bool = Field(
        default=False,
        description="also capture XProf (gemma-jax only): a trace of a few steps and the profiler server; "
        "TensorBoard events go to profiles/<name>/ on every run",
    )
    suspend: bool = Field(default=False, description="declare the run suspended (JobSet spec.suspend)")
    image: str | None = Field(
        default=None, description="trainer image by digest; defaults to the stack's image for the trainer"
    )
    chips_per_host: int | None = Field(
        default=None, ge=1, description="accelerator chips per pod; defaults to all chips of the VM"
    )
    max_restarts: int = Field(
        default=3, ge=0, le=100, description="JobSet restarts on failures other than disruptions and config errors"
    )
    env: dict[str, str] = Field(default_factory=dict, description="extra, non-secret environment variables")


def is_dns_label(name: str) -> bool:
    return len(name) <= MAX_LABEL and bool(_DNS_1035_LABEL.match(name))


def longest_hostname(run_name: str, contract: SchedulingContract) -> str:
    """The longest pod hostname JobSet derives: <jobset>-<replicated job>-<job index>-<pod index>."""
    return f"{run_name}-{REPLICATED_JOB}-{contract.slices - 1}-{contract.hosts_per_slice - 1}"


def validate_runs(runs: Iterable[RunConfig], contracts: Mapping[str, SchedulingContract]) -> list[str]:
    """Every problem of the stack's runs, one message each; an empty list means all runs are valid."""
    runs = list(runs)
    problems = [
        f"runs: name {name!r} is declared {count} times; run names must be unique"
        for name, count in Counter(r.name for r in runs).items()
        if count > 1
    ]
    for index, run in enumerate(runs):
        problems.extend(_run_problems(run, contracts))
        problems.extend(_profile_problems(run, f"runs[{index}].profile"))
    return problems


def _run_problems(run: RunConfig, contracts: Mapping[str, SchedulingContract]) -> list[str]:
    where = f"run {run.name!r}"
    problems = _name_problems(run, where) + _args_problems(run, where) + _env_problems(run, where)
    if run.image is not None and image_problem(run.image):
        problems.append(f"{where}: {image_problem(run.image)}")
    if run.trainer == "gemma-jax" and not run.data:
        problems.append(f"{where}: trainer gemma-jax needs `data` (a file below the bucket's datasets/)")
    contract = contracts.get(run.pool)
    if contract is None:
        problems.append(f"{where}: pool {run.pool!r} does not exist; declared pools: {sorted(contracts)}")
        return problems
    return problems + _placement_problems(run, contract, where)


def _name_problems(run: RunConfig, where: str) -> list[str]:
    if not is_dns_label(run.name):
        return [
            f"{where}: name must be a DNS-1035 label (lower-case letters, digits and '-', "
            f"starting with a letter and ending with a letter or digit, at most {MAX_LABEL} characters)"
        ]
    return []


def _placement_problems(run: RunConfig, contract: SchedulingContract, where: str) -> list[str]:
    problems = []
    wanted = TRAINER_FAMILY[run.trainer]
    if contract.family is not wanted:
        problems.append(
            f"{where}: trainer {run.trainer} needs a {wanted.value.upper()} pool, but pool "
            f"{contract.pool!r} is {contract.shape.description} ({contract.family.value.upper()})"
        )
    chips = run.chips_per_host
    if chips is not None and chips > contract.chips_per_host:
        problems.append(
            f"{where}: chips_per_host={chips} is more than the {contract.chips_per_host} chips of "
            f"one {contract.shape.machine_type} VM in pool {contract.pool!r}"
        )
    elif chips is not None and contract.hosts_per_slice > 1 and chips != contract.chips_per_host:
        problems.append(
            f"{where}: chips_per_host={chips} on multi-host pool {contract.pool!r}: every host of a "
            f"slice must use all {contract.chips_per_host} chips of its VM"
        )
    hostname = longest_hostname(run.name, contract)
    if is_dns_label(run.name) and len(hostname) > MAX_LABEL:
        problems.append(
            f"{where}: name is too long for pool {contract.pool!r}: the pod hostname {hostname!r} "
            f"has {len(hostname)} characters, at most {MAX_LABEL} are allowed"
        )
    return problems


def _profile_problems(run: RunConfig, key: str) -> list[str]:
    if run.profile and not PROFILE_FLAGS[run.trainer]:
        return [
            f"{key}: true on run {run.name!r}, but trainer {run.trainer} has no profiler flag; "
            "allowed: false (TensorBoard events are written to profiles/<name>/ either way), "
            f"or true on a {', '.join(t for t in TRAINERS if PROFILE_FLAGS[t])} run"
        ]
    return []


def _args_problems(run: RunConfig, where: str) -> list[str]:
    given = {arg.split("=", 1)[0] for arg in run.args if arg.startswith("--")}
    problems = [
        f"{where}: flag {flag} is set by the platform from the run's mounts; remove it from args"
        for flag in sorted(given & PLATFORM_FLAGS[run.trainer])
    ]
    return problems + [
        f"{where}: flag {flag} is set by the platform for `profile: true`; remove it from args "
        "and set `profile: true` instead"
        for flag in sorted(given & PROFILE_FLAGS[run.trainer])
    ]


def _env_problems(run: RunConfig, where: str) -> list[str]:
    problems = []
    for name in sorted(run.env):
        if not _ENV_NAME.match(name):
            problems.append(f"{where}: env name {name!r} is not a valid variable name")
        elif name in RESERVED_ENV:
            problems.append(f"{where}: env {name} is set by the platform; remove it from env")
    return problems
