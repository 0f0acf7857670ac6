"""What each trainer needs in its pod: command, flags, environment, extra volumes.

The images hold the repository's `trainers/` package at /app (WORKDIR), so a
trainer is started as a module of that package.
"""

from __future__ import annotations

from infra.imagespec import TRAINER_IMAGES
from infra.names import HF_TOKEN_KEY, HF_TOKEN_SECRET
from infra.scheduling import SchedulingContract
from workloads.spec import RunConfig
from workloads.storage import CHECKPOINT_DIR, DATA_DIR, PROFILE_DIR, Owner

CONTAINER = "trainer"
WORKDIR = "/app"

# Seconds between SIGTERM and SIGKILL: the trainers write a final checkpoint
# when told to stop. GKE gives Spot VMs about 30 s of notice whatever this
# says, but maintenance and `kubectl delete` honour it.
# https://cloud.google.com/kubernetes-engine/docs/concepts/node-pool-upgrade-strategies#graceful-termination
GRACE_SECONDS = {"gemma-jax": 300, "trl-gpu": 600}

# libtpu's port for the hosts of one slice to reach each other.
TPU_RUNTIME_PORT = 8471

# XProf for a gemma-jax run with `profile: true`: a trace of a few steps once
# step 1 (compilation) and the first steps after it are behind, written next
# to the TensorBoard events, and the profiler server, reached through
# `kubectl port-forward` for on-demand capture.
# https://docs.jax.dev/en/latest/profiling.html
PROFILE_STEPS = "10:15"
XPROF_PORT = 9012

HF_TOKEN_DIR = "/var/run/secrets/huggingface"
# Accelerate puts NCCL's shared-memory buffers in /dev/shm; the container
# runtime's 64 MiB default is far too small for 8 GPUs.
SHM_SIZE = "64Gi"
# The Hugging Face cache (HF_HOME: Hub model and dataset downloads) of a
# trl-gpu pod, in an emptyDir rather than the image's home directory. The
# requested size makes the scheduler place the pod on a node with that much
# ephemeral storage, which A4 pools back with their local SSDs
# (infra/node_pools.py): gemma-4-31B-it alone is ~62 GB in bf16, and a
# default 100 GB boot disk also holds the images.
# https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#local-ephemeral-storage
HF_CACHE_DIR = "/var/cache/huggingface"
HF_CACHE_SIZE = "500Gi"


def command(run: RunConfig, chips: int) -> list[str]:
    """The image's own launch command (its Dockerfile CMD), with one process per chip.

    For trl-gpu that is `python -m trainers.trl_gpu.launch --config_file ...
    --num_processes <chips> -m trainers.trl_gpu.sft`: `accelerate launch`
    behind the wrapper that keeps the trainer's exit code (78, 143), which the
    Job's podFailurePolicy and the JobSet's failure policy act on.
    """
    return list(TRAINER_IMAGES[run.trainer].launch_command(chips))


def owner(run: RunConfig) -> Owner | None:
    """Who the trainer runs as when not root: the user its image declares (infra/imagespec.py).

    A run's own `image` is expected to be built from the same Dockerfile (its
    pinned digest stands in for the build), so it runs as the same user.
    """
    image = TRAINER_IMAGES[run.trainer]
    return Owner(image.user, image.group) if image.non_root else None


# The container runtime's default seccomp filter, which GKE Autopilot applies
# to every pod, TPU and GPU ones included: the accelerators are reached
# through device files and ioctls it allows.
# https://cloud.google.com/kubernetes-engine/docs/concepts/seccomp-in-gke
SECCOMP = {"seccompProfile": {"type": "RuntimeDefault"}}


def security_context(run: RunConfig) -> dict:
    """The pod's securityContext: the default seccomp filter, and the image's user for a non-root trainer.

    `fsGroup` also makes the Hugging Face token (a 0400 Secret file owned by
    root) readable through its group, and is what the FUSE driver's fsGroup
    delegation keys on. A root trainer (TPU: GKE documents device access for
    root only) is not given a user.
    """
    who = owner(run)
    if who is None:
        return dict(SECCOMP)
    return {"runAsUser": who.uid, "runAsGroup": who.gid, "fsGroup": who.gid, "runAsNonRoot": True, **SECCOMP}


def container_security_context(run: RunConfig) -> dict:
    """The trainer container's securityContext: no privilege escalation, and capabilities dropped.

    No trainer executes setuid binaries, so `allowPrivilegeEscalation: false`
    (no_new_privs) takes nothing from either. A non-root trainer has no
    effective capabilities anyway, and drops them all; it reaches the GPUs
    through world-accessible device files. The root TPU trainer drops NET_RAW,
    as GKE Autopilot does for every pod including TPU ones, and keeps the
    runtime's other default capabilities: GKE documents TPU access (libtpu
    opening /dev/vfio) for a root container with the defaults, and a root
    trainer without any capability is not a configuration it documents.
    """
    drop = ["ALL"] if owner(run) else ["NET_RAW"]
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": drop}}


def platform_args(run: RunConfig, contract: SchedulingContract) -> list[str]:
    """The flags that tell the trainer where its data, checkpoints and logs are.

    The log directory is always the run's profiles mount, so TensorBoard
    events (and gemma-jax's consumed-samples log) outlive the pod; `profile`
    adds gemma-jax's XProf flags (spec.validate_runs refuses it for trl-gpu).
    """
    if run.trainer == "gemma-jax":
        args = ["--data_path", f"{DATA_DIR}/{run.data}", "--checkpoint_dir", CHECKPOINT_DIR]
        args += ["--log_dir", PROFILE_DIR]
        if run.profile:
            args += ["--profile_steps", PROFILE_STEPS, "--xprof_port", str(XPROF_PORT)]
        peak = contract.shape.accelerator.peak_bf16_flops_per_chip
        return args + ["--peak_flops_per_device", f"{peak:.6g}"]
    args = ["--output_dir", CHECKPOINT_DIR, "--logging_dir", PROFILE_DIR]
    if run.data:
        args += ["--dataset_name", f"{DATA_DIR}/{run.data}"]
    return args


def env(run: RunConfig) -> list[dict]:
    variables = [{"name": "PYTHONUNBUFFERED", "value": "1"}]
    if run.trainer == "trl-gpu":
        # The token is a file from the Secret, never a literal in the manifest.
        variables.append({"name": "HF_TOKEN_PATH", "value": f"{HF_TOKEN_DIR}/{HF_TOKEN_KEY}"})
        # Replaces the image's HF_HOME (the user's home, in the container's writable layer).
        variables.append({"name": "HF_HOME", "value": HF_CACHE_DIR})
    return variables + [{"name": k, "value": v} for k, v in sorted(run.env.items())]


def extra_volumes(run: RunConfig) -> tuple[list[dict], list[dict]]:
    """(volumes, volumeMounts) a trainer needs besides the bucket."""
    if run.trainer != "trl-gpu":
        return [], []
    volumes = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_SIZE}},
        {"name": "hf-cache", "emptyDir": {"sizeLimit": HF_CACHE_SIZE}},
        {
            "name": "hf-token",
            "secret": {
                "secretName": HF_TOKEN_SECRET,
                "items": [{"key": HF_TOKEN_KEY, "path": HF_TOKEN_KEY}],
                "defaultMode": 0o400,
            },
        },
    ]
    mounts = [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "hf-cache", "mountPath": HF_CACHE_DIR},
        {"name": "hf-token", "mountPath": HF_TOKEN_DIR, "readOnly": True},
    ]
    return volumes, mounts


def storage_requests(run: RunConfig) -> dict[str, str]:
    """Ephemeral storage the trainer container requests: the HF cache of a trl-gpu pod.

    A request and no limit: the emptyDir's sizeLimit bounds the cache, and a
    container limit would also count the writable layer and logs against it.
    """
    return {"ephemeral-storage": HF_CACHE_SIZE} if run.trainer == "trl-gpu" else {}


def ports(run: RunConfig, contract: SchedulingContract) -> list[dict]:
    found = []
    if run.trainer == "gemma-jax" and contract.hosts_per_slice > 1:
        found.append({"containerPort": TPU_RUNTIME_PORT, "name": "tpu-runtime", "protocol": "TCP"})
    if run.trainer == "gemma-jax" and run.profile:
        found.append({"containerPort": XPROF_PORT, "name": "xprof", "protocol": "TCP"})
    return found
