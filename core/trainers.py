"""The trainer table: one typed row per trainer, everything the platform knows of it.

A row says which accelerator family the trainer is built for, how its image
starts and as whom, which flags the platform passes it (paths below the run's
mounts, the chip's peak FLOP/s, the process count), which volumes, ports and
grace period its pods get, and what it can profile. Manifests, validation,
image builds and the offline plan read these rows; adding a trainer means a
row here and its own package under trainers/. Pure data: no pydantic, no Pulumi.

The images hold the repository's `trainers/` package at /app (WORKDIR), so a
trainer is started as a module of that package.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from core.catalog import Family
from core.names import RUN_ENV
from trainers import eval_report, export_dir
from trainers.exit_codes import CONFIG_ERROR

__all__ = ["CONFIG_ERROR", "TRAINERS", "Port", "Trainer", "TrainerImage"]

# The dataset staging code (standard library only), which every trainer image
# holds beside its trainer so that the stack's staging Jobs can run in it.
STAGING_MODULE = "trainers.staging"

# The data formats every trainer reads (text, conversational, prompt-completion): a package of the
# trainers' own that each trainer image holds beside its trainer.
DATA_FORMATS_PACKAGE = "trainers.sft_data"
# The modules beside the trainer packages that both trainers import and every image copies
# (docker/*/Dockerfile, their .dockerignore files): one home for what both trainers do alike.
SHARED_MODULES = ("trainers/__init__.py", "trainers/exit_codes.py", "trainers/progress.py", "trainers/export_dir.py",
                  "trainers/eval_report.py")

# The trainer container's name in every pod, and the image's WORKDIR.
CONTAINER = "trainer"
WORKDIR = "/app"

# Where a run of one's own container finds the bucket's prefixes (its mounts), and where it may write
# the progress record `make status` reads (the trainers' format, trainers/progress.py).
DATA_ENV = "GKE_FINETUNE_DATA"
CHECKPOINTS_ENV = "GKE_FINETUNE_CHECKPOINTS"
PROFILES_ENV = "GKE_FINETUNE_PROFILES"
PROGRESS_ENV = "GKE_FINETUNE_PROGRESS"

# Environment variables the manifests set; a run's `env` may not replace them.
RESERVED_ENV = frozenset(
    {
        RUN_ENV,
        DATA_ENV,
        CHECKPOINTS_ENV,
        PROFILES_ENV,
        PROGRESS_ENV,
        "HF_HOME",
        "HF_TOKEN_PATH",
        "MEGASCALE_COORDINATOR_ADDRESS",
        "MEGASCALE_NUM_SLICES",
        "MEGASCALE_SLICE_ID",
        "PYTHONUNBUFFERED",
    }
)

# Where a platform-set path flag points: one of the run's bucket mounts.
MountName = Literal["data", "checkpoints", "profiles"]


@dataclass(frozen=True)
class TrainerImage:
    """How a trainer's image is built and started (its Dockerfile is docker/<trainer>/Dockerfile)."""

    trainer: str
    package: str  # the Python package copied into the image, e.g. trainers.gemma_jax
    entry_module: str  # the trainer module the launch command runs
    command: tuple[str, ...]  # the image's default command (its CMD)
    user: int  # the uid the trainer runs as in the image (0: root)
    group: int  # its primary gid (the Dockerfile's `USER <uid>:<gid>`)
    # The image's non-root account (`useradd --uid <uid> --user-group`) its Jobs that use no accelerator
    # (dataset staging) run as, whatever the trainer runs as; None: the image has none.
    jobs_user: int | None = None
    # The launcher flag that sets the number of processes per host (inserted
    # before the trainer's `-m <module>`), or None when the command has none.
    processes_flag: str | None = None
    # Other modules Jobs run in this image (`python -m <module>`): dataset staging.
    also_runs: tuple[str, ...] = (STAGING_MODULE,)
    # Packages of trainers/ the trainer imports besides its own.
    shared_packages: tuple[str, ...] = (DATA_FORMATS_PACKAGE,)

    @property
    def command_modules(self) -> tuple[str, ...]:
        """Every module the command runs with `-m` (launchers included)."""
        return tuple(self.command[i + 1] for i, w in enumerate(self.command[:-1]) if w == "-m")

    @property
    def non_root(self) -> bool:
        return self.user != 0

    def launch_command(self, processes: int, launcher_args: tuple[str, ...] = ()) -> tuple[str, ...]:
        """The default command, with the process count per host where the launcher takes one (and
        other launcher flags, such as the decoder layer class FSDP wraps for a run's model).

        Run manifests start the trainer with this, so a pod's command and the
        image's CMD differ by those flags alone and cannot drift apart.
        """
        if self.processes_flag is None:
            return self.command
        entry = len(self.command) - 2  # `-m <entry_module>` ends the launch command
        if self.command[entry:] != ("-m", self.entry_module):
            raise ValueError(f"{self.trainer}: command {self.command} does not end with -m {self.entry_module}")
        return (*self.command[:entry], self.processes_flag, str(processes), *launcher_args, *self.command[entry:])

    @property
    def image_name(self) -> str:
        return self.trainer

    @property
    def dockerfile(self) -> str:
        """Path of the Dockerfile, relative to the repository root (the build context)."""
        return f"docker/{self.trainer}/Dockerfile"

    @property
    def dockerignore(self) -> str:
        """BuildKit reads `<Dockerfile>.dockerignore` before the context's `.dockerignore`."""
        return f"{self.dockerfile}.dockerignore"

    @property
    def package_dir(self) -> str:
        return self.package.replace(".", "/")

    @property
    def requirements(self) -> str:
        """The pinned dependency file both the tests' environment and the image install."""
        return f"{self.package_dir}/requirements.txt"


@dataclass(frozen=True)
class Port:
    name: str
    number: int

    def container_port(self) -> dict:
        return {"containerPort": self.number, "name": self.name, "protocol": "TCP"}


@dataclass(frozen=True)
class ModelFlags:
    """How a trainer is told which model to fine-tune (a run's `model:`), and from which weights."""

    model: str  # the flag naming the model
    by_hub_id: bool  # it takes the model's Hub id (core/models.py), else its name
    weights: str  # the flag taking a Hugging Face model directory (a run's `weights:`)
    revision: str | None = None  # the flag taking the Hub revision (a run's `revision:`)
    # The launcher flag naming the decoder layer class FSDP wraps, where it depends on the model.
    layer_class_launch_flag: str | None = None
    # Chats rendered with the model family's shipped template (trainers/sft_data/templates), not the
    # checkpoint's own; and the model the trainer takes when a run names none.
    family_template: bool = False
    default_model: str | None = None

    @property
    def flags(self) -> frozenset[str]:
        return frozenset(f for f in (self.model, self.weights, self.revision) if f)


# What a run's `export:` and `eval.metric` may ask for (stack/run_export.py): the trainers' own values.
EXPORT_FORMATS = export_dir.FORMATS
EXPORT_DTYPES = export_dir.DTYPES
EVAL_METRICS = eval_report.METRICS


@dataclass(frozen=True)
class ExportFlags:
    """How a trainer is told to write its model when training succeeds (a run's `export:`) and to
    evaluate it (`eval:`); every flag is set by the platform, and a run's `args` may not repeat it."""

    directory: str  # the flag taking the export directory (the run's exports mount)
    dtype: str  # the flag taking one of EXPORT_DTYPES
    # The flag choosing LoRA merged into the base (true) or the adapter alone (false); None: the
    # trainer writes merged weights only.
    merge: str | None
    # The task metrics the trainer computes (EVAL_METRICS but auto and none).
    metrics: tuple[str, ...] = ()
    # The evaluation's flags, the same in every trainer; eval_samples None: the trainer generates
    # the stack's own prompts only (no held-out records to prompt with).
    eval_samples: str | None = "--eval_samples"
    eval_prompts: str = "--eval_prompts"
    eval_max_new_tokens: str = "--eval_max_new_tokens"
    eval_compare_base: str = "--eval_compare_base"
    eval_metric: str = "--eval_metric"

    @property
    def flags(self) -> frozenset[str]:
        return frozenset(f for f in (self.directory, self.dtype, self.merge, self.eval_samples, self.eval_prompts,
                                     self.eval_max_new_tokens, self.eval_compare_base, self.eval_metric) if f)


@dataclass(frozen=True)
class Trainer:
    """One trainer: its image, its accelerator family and what its pods get from the platform."""

    name: str
    family: Family
    image: TrainerImage
    # Seconds between SIGTERM and SIGKILL: the trainer writes a final checkpoint when told to stop.
    # A run's delete (`destroy`, a replace) waits for it: components/runs.py gives the JobSet's delete
    # this grace period plus a margin, and the run's bucket grants are revoked only after the delete.
    grace_seconds: int
    # Flags the platform passes, in order, each pointing below one of the run's mounts.
    # A "data" flag is passed only when the run names `data`.
    path_flags: tuple[tuple[str, MountName], ...]
    # Whether a run must name `data` (a file below datasets/<stack>/); else the trainer has a default source.
    data_required: bool
    # The trainer's stdlib-only module declaring its flags, with
    # `argument_problems(argv) -> list[str]`; a run's `args` are checked with it
    # before anything is declared (stack/runs.py loads it by name).
    flags_module: str = ""
    # The module that writes this trainer's token shards from a text file
    # (`python -m <module>`, in its image), where the trainer reads them at
    # its data flag; the staging Job runs it for a dataset with `tokenize`.
    token_shards_module: str | None = None
    # The flag taking the chip's peak bf16 FLOP/s (for MFU), or None.
    peak_flops_flag: str | None = None
    # What `profile: true` adds to the arguments, and the port the profiler serves on.
    # Empty: the trainer cannot profile, and `profile: true` is refused.
    profile_args: tuple[str, ...] = ()
    profile_port: Port | None = None
    # The port the hosts of a multi-host slice reach each other on, or None.
    slice_port: Port | None = None
    # The Hugging Face token as a file (HF_TOKEN_PATH), a Hub cache emptyDir of
    # this size (HF_HOME), a memory-backed /dev/shm of this size.
    hf_token: bool = False
    hf_cache_size: str | None = None
    shm_size: str | None = None
    # How a run's `model:` reaches the trainer; None: the trainer takes no model by name.
    model_flags: ModelFlags | None = None
    # The trainer's stdlib-only module with `estimate_run(argv, chips, slices)`: its memory per
    # accelerator chip (admission/accelerator_memory.py); None: the platform's own GPU model applies.
    memory_module: str | None = None
    # How a run's `export:` and `eval:` reach the trainer; None: the trainer exports nothing.
    export_flags: ExportFlags | None = None

    @property
    def platform_flags(self) -> frozenset[str]:
        """Flags the platform sets itself; a run's `args` may not repeat them."""
        flags = {flag for flag, _ in self.path_flags}
        flags |= {f for f in (self.peak_flops_flag, self.image.processes_flag) if f}
        return frozenset(flags)

    @property
    def profile_flags(self) -> frozenset[str]:
        return frozenset(a for a in self.profile_args if a.startswith("--"))

    @property
    def can_profile(self) -> bool:
        return bool(self.profile_args)


# XProf for a run with `profile: true`: a trace of a few steps once step 1
# (compilation) and the first steps after it are behind, written next to the
# TensorBoard events, and the profiler server, reached through
# `kubectl port-forward` for on-demand capture. https://docs.jax.dev/en/latest/profiling.html
_XPROF = Port("xprof", 9012)
_PROFILE_STEPS = "10:15"
# libtpu's port for the hosts of one slice to reach each other.
_TPU_RUNTIME = Port("tpu-runtime", 8471)

_ROWS = (
    Trainer(
        name="gemma-jax",
        family=Family.TPU,
        image=TrainerImage(
            trainer="gemma-jax",
            package="trainers.gemma_jax",
            entry_module="trainers.gemma_jax.train",
            command=("python", "-m", "trainers.gemma_jax.train"),
            # Root: GKE documents TPU device access (/dev/vfio) for root only (manifests/pod.py).
            user=0,
            group=0,
            jobs_user=1000,
        ),
        # GKE gives Spot VMs about 30 s of notice whatever this says, but
        # maintenance and `kubectl delete` honour it.
        # https://cloud.google.com/kubernetes-engine/docs/concepts/node-pool-upgrade-strategies#graceful-termination
        grace_seconds=300,
        path_flags=(("--data_path", "data"), ("--checkpoint_dir", "checkpoints"), ("--log_dir", "profiles")),
        data_required=True,
        flags_module="trainers.gemma_jax.flags",
        token_shards_module="trainers.gemma_jax.token_shards",
        peak_flops_flag="--peak_flops_per_device",
        model_flags=ModelFlags(model="--model", by_hub_id=False, weights="--init_from_hf", family_template=True,
                               default_model="gemma3-270m"),
        memory_module="trainers.gemma_jax.memory",
        # Merged weights only: the JAX trainer's LoRA tensors have no PEFT adapter layout to write.
        # Its held-out split is packed token rows, with no prompt to generate from: eval prompts are the stack's.
        export_flags=ExportFlags(directory="--export_hf", dtype="--export_dtype", merge=None, eval_samples=None),
        profile_args=("--profile_steps", _PROFILE_STEPS, "--xprof_port", str(_XPROF.number)),
        profile_port=_XPROF,
        slice_port=_TPU_RUNTIME,
    ),
    Trainer(
        name="trl-gpu",
        family=Family.GPU,
        image=TrainerImage(
            trainer="trl-gpu",
            package="trainers.trl_gpu",
            entry_module="trainers.trl_gpu.sft",
            # `accelerate launch` behind a wrapper that keeps the trainer's exit code.
            command=(
                "python", "-m", "trainers.trl_gpu.launch",
                "--config_file", "trainers/trl_gpu/accelerate_fsdp_8gpu.yaml",
                "-m", "trainers.trl_gpu.sft",
            ),  # fmt: skip
            user=1000,
            group=1000,
            jobs_user=1000,
            # Overrides the accelerate config file's 8 when a run uses fewer GPUs.
            processes_flag="--num_processes",
        ),
        grace_seconds=600,
        path_flags=(("--output_dir", "checkpoints"), ("--logging_dir", "profiles"), ("--dataset_name", "data")),
        data_required=False,  # reads its Hub dataset when the run names no `data`
        flags_module="trainers.trl_gpu.flags",
        model_flags=ModelFlags(model="--model_id", by_hub_id=True, weights="--model_id", revision="--model_revision",
                               layer_class_launch_flag="--fsdp_transformer_layer_cls_to_wrap"),
        hf_token=True,
        export_flags=ExportFlags(directory="--export_dir", dtype="--export_dtype", merge="--export_merge",
                                 metrics=("sql-execution",)),
        # gemma-4-31B-it alone is ~62 GB in bf16, and a boot disk also holds
        # the images: the cache goes to an emptyDir on local SSD, sized to
        # hold the model twice over beside the dataset, within what the A4
        # tutorial's Autopilot pod requests (350Gi with the FUSE sidecar's).
        hf_cache_size="300Gi",
        # Accelerate puts NCCL's shared-memory buffers in /dev/shm; the container
        # runtime's 64 MiB default is far too small for 8 GPUs.
        shm_size="64Gi",
    ),
)

TRAINERS: dict[str, Trainer] = {row.name: row for row in _ROWS}

# How the plan and the status name a run of one's own container (a run without `trainer`).
OWN_CONTAINER = "container"
# Its grace period between SIGTERM and SIGKILL: the JAX trainer's, to save a checkpoint.
OWN_CONTAINER_GRACE_SECONDS = 300
# Its /dev/shm on GPU nodes, as the GPU trainer's (NCCL's shared-memory buffers between the 8 GPUs).
OWN_CONTAINER_GPU_SHM = "64Gi"
# The uid and gid it runs as on GPU nodes unless the run says `runAs`: the GPU trainer's, since a container
# needs no root to reach the NVIDIA devices (docker/trl-gpu/Dockerfile), so its pods meet the Pod Security
# Standards' restricted profile. On TPU nodes it runs as its image's user (manifests/pod.py says why).
OWN_CONTAINER_GPU_ACCOUNT = (1000, 1000)


def own_container_row(family: Family, hf_token: bool = False, user: int = 0, group: int = 0) -> Trainer:
    """What a run of one's own container gets from the platform: a trainer's row without a trainer.

    Its command and arguments are the run's own (no platform flag: the mounts' paths come as
    DATA_ENV, CHECKPOINTS_ENV, PROFILES_ENV), and it gets what a trainer of its pool's family
    gets: the TPU hosts' port on a multi-host slice, /dev/shm on GPU nodes, the Hugging Face
    token as a file when the run asks for it. It runs as the image's user unless the run names one.
    """
    image = TrainerImage(trainer=OWN_CONTAINER, package="", entry_module="", command=(), user=user, group=group,
                         also_runs=(), shared_packages=())
    return Trainer(
        name=OWN_CONTAINER,
        family=family,
        image=image,
        grace_seconds=OWN_CONTAINER_GRACE_SECONDS,
        path_flags=(),
        data_required=False,
        slice_port=_TPU_RUNTIME if family is Family.TPU else None,
        hf_token=hf_token,
        shm_size=OWN_CONTAINER_GPU_SHM if family is Family.GPU else None,
    )
