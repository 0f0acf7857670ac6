"""What a stack file says about one fine-tuning run (the `runs:` list), and its checks.

`run_problems` is the one place a run is checked against the contracts of
the pools it names and against its trainer's row in the trainer table; the
stack's validation calls it, so that every problem is reported, one clear
message each, before any resource is declared.
"""

from __future__ import annotations

import ast
import importlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from core.contract import SchedulingContract
from core.images import image_problem
from core.names import REPLICATED_JOB
from core.syntax import DNS_LABEL_MAX, is_dns_label
from core.catalog import Family
from core.trainers import OWN_CONTAINER_GPU_ACCOUNT, TRAINERS, Trainer, own_container_row
from stack.models import Count, Flag
from stack.own_container import RunAs, own_container_problems
from stack.problems import MISSING, Problem
from stack.run_data import DATA_FLAGS, data_flags, data_problems
from stack.run_mix import MixSource, data_path_problems, mix_problems
from stack.run_env import EnvValue, env_problems, size_problems
from stack.run_export import EvalConfig, ExportConfig, export_args, export_problems
from stack.run_model import launcher_args, model_args, model_problems


class RunConfig(BaseModel):
    """One run: which trainer (or which container of one's own), on which pool, with which arguments."""

    # camelCase keys in the stack file, like the rest of its config.
    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True)

    name: str = Field(description="DNS-1035 label; names the JobSet and the checkpoint prefix")
    trainer: str | None = Field(
        default=None,
        description="a trainer of the trainer table (core/trainers.py); none: a run of your own container "
        "(image and command)",
    )
    pool: str = Field(description="the pool (Standard) or accelerator shape (Autopilot) it runs on")
    # Kueue: the capacity ladder after `pool`, and the run's priority (stack/queueing.py checks both).
    ladder: tuple[str, ...] = Field(
        default=(), description="pools to try, in order, when the ones before have no room (Kueue flavors)"
    )
    priority: str | None = Field(default=None, description="a WorkloadPriorityClass (core/names.py)")
    args: tuple[str, ...] = Field(default=(), description="trainer flags (or the command's arguments), verbatim")
    # A run of one's own container (stack/own_container.py).
    command: tuple[str, ...] = Field(default=(), description="your own container's command (a run without trainer)")
    hf_token: Flag = Field(default=False, description="your own container: the Hugging Face token (hfTokenSecret) as a file")
    run_as: RunAs | None = Field(default=None, description="your own container: its uid and gid (default: 1000:1000 on GPU, the image's on TPU)")
    # The data settings, passed to the trainer as flags (stack/run_data.py).
    format: str | None = Field(default=None, description="text | conversational | prompt-completion")
    columns: dict[str, str] = Field(default_factory=dict, description="standard column -> the file's column")
    prompt_template: str | None = Field(default=None, description="prompt-completion: the prompt from {column}s")
    system_prompt: str | None = Field(default=None, description="a system turn before every chat")
    loss: str | None = Field(default=None, description="completion (default) | all")
    mix: tuple[MixSource, ...] = Field(default=(), description="several datasets mixed by weight, each with its "
                                       "own format and columns, instead of `data` (stack/run_mix.py)")
    # The model, by name (stack/run_model.py).
    model: str | None = Field(default=None, description="a Gemma model by name (core/models.py)")
    revision: str | None = Field(default=None, description="the Hub revision of the model's checkpoint (a trainer that reads the Hub)")
    weights: str | None = Field(default=None,
                                description="a Hugging Face model directory below datasets/<stack>/")
    data: str | None = Field(
        default=None,
        description="file or directory below the bucket's datasets/<stack>/ prefix the trainer reads "
        "(required by trainers that have no default source)",
    )
    profile: Flag = Field(
        default=False,
        description="also capture a profile (trainers that can): a trace of a few steps and the profiler "
        "server; TensorBoard events go to profiles/<name>/ on every run",
    )
    suspend: Flag = Field(default=False, description="declare the run suspended (JobSet spec.suspend)")
    image: str | None = Field(
        default=None, description="trainer image by digest; defaults to the stack's image for the trainer"
    )
    chips_per_host: Count | None = Field(
        default=None, ge=1, description="accelerator chips per pod; defaults to all chips of the VM"
    )
    max_restarts: Count = Field(
        default=3, ge=0, le=100, description="JobSet restarts on failures other than disruptions and config errors"
    )
    env: dict[str, EnvValue] = Field(default_factory=dict, description="extra environment variables: text, "
                                            "or {secret: <Secret>, key: <key>} (stack/run_env.py)")
    # The model once trained (stack/run_export.py).
    export: ExportConfig | None = Field(default=None, description="write the model to exports/<stack>/<name>/")
    eval: EvalConfig | None = Field(default=None, description="held-out loss, samples and metric beside the export")

    @field_validator("trainer")
    @classmethod
    def _known_trainer(cls, value: str | None) -> str | None:
        if value is not None and value not in TRAINERS:
            raise ValueError(f"is not a trainer; allowed: {', '.join(TRAINERS)}")
        return value

    @property
    def row(self) -> Trainer:
        """This run's trainer, from the trainer table (a run of one's own container: `row_on`)."""
        if self.trainer is None:
            raise ValueError(f"run {self.name!r} has no trainer: its row depends on its pool (row_on)")
        return TRAINERS[self.trainer]

    def row_on(self, family: Family) -> Trainer:
        """What the run's pods get on a pool of `family`: its trainer's row, or its own container's."""
        if self.trainer is not None:
            return TRAINERS[self.trainer]
        who = self.run_as
        if who is not None:
            return own_container_row(family, self.hf_token, who.user, who.group)
        # Unless `runAs` says otherwise: non-root on GPU nodes, the image's user on TPU nodes.
        user, group = OWN_CONTAINER_GPU_ACCOUNT if family is Family.GPU else (0, 0)
        return own_container_row(family, self.hf_token, user, group)

    @property
    def label(self) -> str:
        """The trainer, or `container` for a run of one's own container (plan, status)."""
        return self.trainer or own_container_row(Family.TPU).name

    def data_flags(self) -> list[str]:
        return data_flags(self)

    def model_args(self, data_dir: str) -> list[str]:
        return model_args(self, data_dir)

    def launcher_args(self) -> tuple[str, ...]:
        return launcher_args(self)

    def export_args(self, export_dir: str) -> list[str]:
        return export_args(self, export_dir)


def longest_hostname(run_name: str, contract: SchedulingContract) -> str:
    """The longest pod hostname JobSet derives: <jobset>-<replicated job>-<job index>-<pod index>."""
    return f"{run_name}-{REPLICATED_JOB}-{contract.slices - 1}-{contract.hosts_per_slice - 1}"


def run_problems(runs: Iterable[RunConfig], contracts: Mapping[str, SchedulingContract]) -> list[Problem]:
    """Every problem of the stack's runs; an empty list means all runs are valid."""
    runs = list(runs)
    counts, seen, problems = Counter(r.name for r in runs), set(), []
    for i, run in enumerate(runs):
        if run.name in seen:
            problems.append(Problem(f"runs[{i}].name", run.name, f"is declared {counts[run.name]} times",
                                    "unique run names"))
        seen.add(run.name)
    for index, run in enumerate(runs):
        key = f"runs[{index}]"
        problems += [p.under(key) for p in _one_run_problems(run, contracts)]
    return problems


def _one_run_problems(run: RunConfig, contracts: Mapping[str, SchedulingContract]) -> list[Problem]:
    """The run's problems, its pool's first: a pool that doesn't exist, or a trainer of the other family,
    is the root cause that the trainer's flag and profile problems often follow from."""
    where = f"on run {run.name!r}"
    contract = contracts.get(run.pool)
    if contract is None:
        first = [Problem("pool", run.pool, f"does not exist {where}", ", ".join(map(repr, sorted(contracts))))]
    else:
        first = _family_problems(run, contract, where)
    problems = first + _name_problems(run) + env_problems(run.env, where) + size_problems(run, where)
    problems += data_path_problems(run.data, where) + mix_problems(run, where)
    problems += own_container_problems(run, where) + data_problems(run, where) + model_problems(run, where)
    problems += export_problems(run, where)
    if run.trainer is None:
        problems += _own_container_profile(run, where)
    else:
        problems += _args_problems(run, where) + _profile_problems(run, where) + _flag_problems(run, where)
        problems += _trainer_image_and_data_problems(run, where)
    return problems + (_placement_problems(run, contract, where) if contract is not None else [])


def _name_problems(run: RunConfig) -> list[Problem]:
    if not is_dns_label(run.name):
        return [Problem("name", run.name, "is not a DNS-1035 label",
                        f"lower-case letters, digits and '-', starting with a letter and ending with a letter "
                        f"or digit, at most {DNS_LABEL_MAX} characters")]
    return []


def _trainer_image_and_data_problems(run: RunConfig, where: str) -> list[Problem]:
    problems = []
    if run.image is not None and image_problem(run.image):
        problems.append(Problem("image", run.image, f"{where} must be pinned by digest",
                                "<registry>/<repository>@sha256:<64 hex digits>, not a tag"))
    if run.row.data_required and run.data is None and not run.mix:  # blank: data_path_problems
        problems.append(Problem("data", MISSING, f"{where}: trainer {run.trainer} needs `data`",
                                "a file below the bucket's datasets/<stack>/, or a `mix` of datasets"))
    return problems


def _family_problems(run: RunConfig, contract: SchedulingContract, where: str) -> list[Problem]:
    wanted = run.row_on(contract.family).family  # a run of one's own container takes any pool
    if contract.family is wanted:
        return []
    return [Problem(
        "pool", run.pool,
        f"{where}: trainer {run.trainer} needs a {wanted.value.upper()} pool, but pool {contract.pool!r} "
        f"is {contract.shape.description} ({contract.family.value.upper()}); the problems below may follow from it",
        f"a {wanted.value.upper()} pool",
    )]


def _placement_problems(run: RunConfig, contract: SchedulingContract, where: str) -> list[Problem]:
    problems = []
    chips = run.chips_per_host
    if chips is not None and chips > contract.chips_per_host:
        problems.append(Problem(
            "chipsPerHost", chips,
            f"{where} is more than the {contract.chips_per_host} chips of one {contract.shape.machine_type} "
            f"VM in pool {contract.pool!r}", f"1..{contract.chips_per_host}",
        ))
    elif chips is not None and contract.hosts_per_slice > 1 and chips != contract.chips_per_host:
        problems.append(Problem(
            "chipsPerHost", chips,
            f"{where} on multi-host pool {contract.pool!r}: every host of a slice must use all "
            f"{contract.chips_per_host} chips of its VM", str(contract.chips_per_host),
        ))
    hostname = longest_hostname(run.name, contract)
    if is_dns_label(run.name) and len(hostname) > DNS_LABEL_MAX:
        problems.append(Problem(
            "name", run.name,
            f"is too long for pool {contract.pool!r}: the pod hostname {hostname!r} has {len(hostname)} characters",
            f"names whose pod hostnames have at most {DNS_LABEL_MAX} characters",
        ))
    return problems


def _profile_problems(run: RunConfig, where: str) -> list[Problem]:
    if run.profile and not run.row.can_profile:
        profilers = ", ".join(name for name, row in TRAINERS.items() if row.can_profile)
        return [Problem(
            "profile", True, f"{where}, but trainer {run.trainer} has no profiler flag",
            f"false (TensorBoard events are written to profiles/<name>/ either way), or true on a {profilers} run",
        )]
    return []


def _own_container_profile(run: RunConfig, where: str) -> list[Problem]:
    if run.profile:
        return [Problem("profile", True, f"{where}: the platform has no profiler flag to pass your own container",
                        "false (profiles/<name>/ is mounted at GKE_FINETUNE_PROFILES either way)")]
    return []


def _args_problems(run: RunConfig, where: str) -> list[Problem]:
    given = {arg.split("=", 1)[0] for arg in run.args if arg.startswith("--")}
    problems = [
        Problem("args", flag, f"{where}: flag {flag} is set from the run's `{DATA_FLAGS[flag]}`",
                f"`{DATA_FLAGS[flag]}` instead")
        for flag in sorted(given & set(DATA_FLAGS))
    ]
    problems += [
        Problem("args", flag, f"{where}: flag {flag} is set by the platform from the run's mounts",
                "args without it")
        for flag in sorted(given & run.row.platform_flags)
    ]
    if run.model is not None and run.row.model_flags is not None:
        problems += [Problem("args", flag, f"{where}: flag {flag} is set from the run's `model`", "`model` alone")
                     for flag in sorted(given & run.row.model_flags.flags)]
    if run.row.export_flags is not None:
        problems += [Problem("args", flag, f"{where}: flag {flag} is set from the run's `export` and `eval`",
                             "`export` and `eval` instead")
                     for flag in sorted(given & run.row.export_flags.flags)]
    return problems + [
        Problem("args", flag, f"{where}: flag {flag} is set by the platform for `profile: true`",
                "`profile: true` instead")
        for flag in sorted(given & run.row.profile_flags)
    ]


@cache
def _argument_checker(module: str) -> Callable[[Sequence[str]], list[str]]:
    """The trainer's own `argument_problems`, from its stdlib-only flags module (core/trainers.py)."""
    return importlib.import_module(module).argument_problems


def _flag_problems(run: RunConfig, where: str) -> list[Problem]:
    """The run's own `args` against its trainer's flag declarations (the platform's flags come after)."""
    if not run.row.flags_module:
        return []
    module = run.row.flags_module
    # Reported once, by _args_problems.
    refused = run.row.platform_flags | run.row.profile_flags | set(DATA_FLAGS)
    if run.row.export_flags is not None:
        refused |= run.row.export_flags.flags
    if run.model is not None and run.row.model_flags is not None:
        refused |= run.row.model_flags.flags
    allowed = f"the flags {module} declares (python -m {run.row.image.entry_module} --help)"
    problems = []
    for line in _argument_checker(module)(list(run.args)):
        flag, sep, why = line.partition(": ")
        if not sep:
            flag, why = list(run.args), line
        elif flag[:1] in "'\"":
            flag = ast.literal_eval(flag)  # a stray value, quoted by the trainer
        if flag in refused:
            continue
        problems.append(Problem("args", flag, f"{where}: {why}", allowed))
    return problems
