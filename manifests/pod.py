"""What a trainer's pod gets, built from its row in the trainer table (core/trainers.py).

Command, platform flags, environment, volumes, ports, requests and security
contexts: every choice here is read off the run's trainer row, never from
the trainer's name. A run of one's own container has a row of its own
(`RunConfig.row_on`: what a trainer of its pool's family gets), its own
command and arguments, and the mounts' paths in its environment.
"""

from __future__ import annotations

import math

from core import quantity
from core.allocatable import MEMORY_MODEL_MARGIN
from core.contract import SchedulingContract
from core.names import HF_TOKEN_KEY, HF_TOKEN_SECRET, RUN_ENV
from core.trainers import (CHECKPOINTS_ENV, CONTAINER, DATA_ENV, PROFILES_ENV, PROGRESS_ENV, WORKDIR,
                           Trainer)
from manifests import storage
from manifests.storage import CHECKPOINT_DIR, DATA_DIR, EXPORT_DIR, PROFILE_DIR, Owner
from stack.runs import RunConfig

__all__ = ["CONTAINER", "WORKDIR"]

# Where the platform-set path flags point, by mount (manifests/storage.py).
MOUNT_DIRS = {"data": DATA_DIR, "checkpoints": CHECKPOINT_DIR, "profiles": PROFILE_DIR}

HF_TOKEN_DIR = "/var/run/secrets/huggingface"
# The Hugging Face cache (HF_HOME: Hub model and dataset downloads) in an
# emptyDir rather than the image's home directory. The requested size makes
# the scheduler place the pod on a node with that much ephemeral storage,
# which A4 pools back with their local SSDs (components/node_pools.py).
# https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#local-ephemeral-storage
HF_CACHE_DIR = "/var/cache/huggingface"


# The progress record `make status` reads, where a run's container may write it (tools/status/sources.py).
PROGRESS_FILE = "progress.json"


def command(run: RunConfig, row: Trainer, chips: int) -> list[str]:
    """The image's own launch command (its Dockerfile CMD), with one process per chip.

    For a launcher image that is e.g. `python -m trainers.trl_gpu.launch
    --config_file ... --num_processes <chips> -m trainers.trl_gpu.sft`:
    `accelerate launch` behind the wrapper that keeps the trainer's exit code
    (78, 143), which the Job's podFailurePolicy and the JobSet's failure
    policy act on. A run of one's own container: its `command`.
    """
    if run.trainer is None:
        return list(run.command)
    return list(row.image.launch_command(chips, run.launcher_args()))


def owner(row: Trainer) -> Owner | None:
    """Who the trainer runs as when not root: the user its image declares (core/trainers.py).

    A run's own `image` is expected to be built from the same Dockerfile (its
    pinned digest stands in for the build), so it runs as the same user; one's
    own container runs as its `runAs`.
    """
    image = row.image
    return Owner(image.user, image.group) if image.non_root else None


# The container runtime's default seccomp filter, which GKE Autopilot applies
# to every pod, TPU and GPU ones included: the accelerators are reached
# through device files and ioctls it allows.
# https://cloud.google.com/kubernetes-engine/docs/concepts/seccomp-in-gke
SECCOMP = {"seccompProfile": {"type": "RuntimeDefault"}}


def security_context(row: Trainer) -> dict:
    """The pod's securityContext: the default seccomp filter, and the image's user for a non-root trainer.

    `fsGroup` also makes the Hugging Face token (a 0400 Secret file owned by
    root) readable through its group, and is what the FUSE driver's fsGroup
    delegation keys on. A root trainer (TPU: GKE documents device access for
    root only) is not given a user.
    """
    who = owner(row)
    if who is None:
        return dict(SECCOMP)
    return {"runAsUser": who.uid, "runAsGroup": who.gid, "fsGroup": who.gid, "runAsNonRoot": True, **SECCOMP}


def container_security_context(row: Trainer) -> dict:
    """The trainer container's securityContext: no privilege escalation, and capabilities dropped.

    No trainer executes setuid binaries, so `allowPrivilegeEscalation: false`
    (no_new_privs) takes nothing from either. A non-root trainer has no
    effective capabilities anyway, and drops them all; it reaches the GPUs
    through world-accessible device files. A root (TPU) trainer drops NET_RAW,
    as GKE Autopilot does for every pod including TPU ones, and keeps the
    runtime's other default capabilities: GKE documents TPU access (libtpu
    opening /dev/vfio) for a root container with the defaults, and a root
    trainer without any capability is not a configuration it documents.
    """
    drop = ["ALL"] if owner(row) else ["NET_RAW"]
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": drop}}


def platform_args(run: RunConfig, row: Trainer, contract: SchedulingContract, data_path: str | None = None) -> list[str]:
    """The flags that tell the trainer where its data, checkpoints and logs are, and its data settings.

    The log directory is always the run's profiles mount, so TensorBoard
    events (and a trainer's own logs) outlive the pod; `profile` adds the
    trainer's profiler flags (stack/runs.py refuses it where it has none).
    One's own container gets none: its arguments are its own.
    """
    if run.trainer is None:
        return []
    args = []
    for flag, mount in row.path_flags:
        if mount == "data":
            if data_path:
                args += [flag, f"{DATA_DIR}/{data_path}"]
        else:
            args += [flag, MOUNT_DIRS[mount]]
    if run.profile:
        args += list(row.profile_args)
    if row.peak_flops_flag:
        args += [row.peak_flops_flag, f"{contract.shape.accelerator.peak_bf16_flops_per_chip:.6g}"]
    return args + run.model_args(DATA_DIR) + run.data_flags() + run.export_args(EXPORT_DIR)


def mount_env(data_path: str | None) -> list[dict]:
    """Where one's own container finds the run's mounts, and where its progress record goes."""
    return [
        {"name": DATA_ENV, "value": f"{DATA_DIR}/{data_path}" if data_path else DATA_DIR},
        {"name": CHECKPOINTS_ENV, "value": CHECKPOINT_DIR},
        {"name": PROFILES_ENV, "value": PROFILE_DIR},
        {"name": PROGRESS_ENV, "value": f"{CHECKPOINT_DIR}/{PROGRESS_FILE}"},
    ]


def env(run: RunConfig, row: Trainer, data_path: str | None = None) -> list[dict]:
    variables = [{"name": "PYTHONUNBUFFERED", "value": "1"}, {"name": RUN_ENV, "value": run.name}]
    if run.trainer is None:
        variables += mount_env(data_path)
    if row.hf_token:
        # The token is a file from the Secret, never a literal in the manifest.
        variables.append({"name": "HF_TOKEN_PATH", "value": f"{HF_TOKEN_DIR}/{HF_TOKEN_KEY}"})
    if row.hf_cache_size:
        # Replaces the image's HF_HOME (the user's home, in the container's writable layer).
        variables.append({"name": "HF_HOME", "value": HF_CACHE_DIR})
    return variables + [{"name": k, "value": v} for k, v in sorted(run.env.items())]


def extra_volumes(row: Trainer) -> tuple[list[dict], list[dict]]:
    """(volumes, volumeMounts) a trainer needs besides the bucket."""
    volumes, mounts = [], []
    if row.shm_size:
        volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": row.shm_size}})
        mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
    if row.hf_cache_size:
        volumes.append({"name": "hf-cache", "emptyDir": {"sizeLimit": row.hf_cache_size}})
        mounts.append({"name": "hf-cache", "mountPath": HF_CACHE_DIR})
    if row.hf_token:
        volumes.append({
            "name": "hf-token",
            "secret": {
                "secretName": HF_TOKEN_SECRET,
                "items": [{"key": HF_TOKEN_KEY, "path": HF_TOKEN_KEY}],
                "defaultMode": 0o400,
            },
        })
        mounts.append({"name": "hf-token", "mountPath": HF_TOKEN_DIR, "readOnly": True})
    return volumes, mounts


# What the trainer leaves on a node for GKE's own DaemonSets (logging, metadata
# server, device plugin, CSI node drivers: under 1 vCPU and 2 GiB together on
# an accelerator node) and a few of the user's.
SYSTEM_HEADROOM_CPU = 2
SYSTEM_HEADROOM_MEMORY_GIB = 8
# Ephemeral storage of a trainer without a Hub cache: logs and scratch files.
SCRATCH_STORAGE = "10Gi"


def memory_volumes_gib(row: Trainer, contract: SchedulingContract) -> float:
    """Memory-backed emptyDirs of the pod (/dev/shm, an in-memory data cache): they use node memory."""
    shm = quantity.gib(row.shm_size) if row.shm_size else 0.0
    cache = storage.cache_plan(contract)
    return shm + (cache.gib if cache.in_memory else 0)


def resource_requests(row: Trainer, contract: SchedulingContract) -> dict[str, str]:
    """CPU, memory and ephemeral storage the trainer requests: what its node can give.

    The pod owns its VM (all of its chips), so it asks for the node's
    allocatable less the FUSE sidecar, the memory-backed volumes, room
    for the node's DaemonSets and the memory model's margin; Autopilot would otherwise give it its small
    defaults. Ephemeral storage is the Hub cache where the trainer has one.
    No CPU/memory limits on Standard (a limit would throttle or OOM-kill
    a whole-node trainer); Autopilot sets limits equal to requests.
    https://cloud.google.com/kubernetes-engine/docs/concepts/autopilot-resource-requests
    """
    return node_requests(contract, memory_volumes_gib(row, contract), row.hf_cache_size or SCRATCH_STORAGE)


def node_requests(contract: SchedulingContract, memory_volumes: float, ephemeral: str) -> dict[str, str]:
    """The requests of a pod that owns its VM: the node's allocatable less the FUSE sidecar, `memory_volumes`
    GiB of memory-backed volumes, room for the node's DaemonSets and the memory model's margin; on Autopilot,
    capped at what it admits for the accelerator."""
    node = contract.allocatable
    cpu = node.cpu - float(quantity.parse(storage.SIDECAR_CPU)) - SYSTEM_HEADROOM_CPU
    # The capacity model's margin stays free too (core/allocatable.py, admission/fit.py).
    memory = (node.memory / quantity.GIB * (1 - MEMORY_MODEL_MARGIN) - quantity.gib(storage.SIDECAR_MEMORY)
              - memory_volumes - SYSTEM_HEADROOM_MEMORY_GIB)
    requests = {
        "cpu": str(max(1, math.floor(cpu))),
        "memory": f"{max(1, math.floor(memory))}Gi",
        "ephemeral-storage": ephemeral,
    }
    if contract.autopilot:
        for resource, cap in contract.shape.accelerator.autopilot_request_caps:
            if quantity.parse(requests[resource]) > quantity.parse(cap):
                requests[resource] = cap
    return requests


def ports(run: RunConfig, row: Trainer, contract: SchedulingContract) -> list[dict]:
    found = []
    if row.slice_port and contract.hosts_per_slice > 1:
        found.append(row.slice_port.container_port())
    if row.profile_port and run.profile:
        found.append(row.profile_port.container_port())
    return found


def grace_seconds(row: Trainer) -> int:
    return row.grace_seconds
