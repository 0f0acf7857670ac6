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
from core.names import RUN_ENV
from core.trainers import (CHECKPOINTS_ENV, CONTAINER, DATA_ENV, PROFILES_ENV, PROGRESS_ENV, WORKDIR,
                           Trainer)
from manifests import storage
from manifests.storage import CHECKPOINT_DIR, DATA_DIR, EXPORT_DIR, PROFILE_DIR, Owner
from manifests.token import HF_TOKEN_FILE, token_mount, token_volume
from stack.run_env import env_entry
from stack.run_mix import mix_flag
from stack.runs import RunConfig

__all__ = ["CONTAINER", "WORKDIR"]

# Where the platform-set path flags point, by mount (manifests/storage.py).
MOUNT_DIRS = {"data": DATA_DIR, "checkpoints": CHECKPOINT_DIR, "profiles": PROFILE_DIR}

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
    """The pod's securityContext: the default seccomp filter, and the image's user for a non-root trainer."""
    return owner_security_context(owner(row))


def owner_security_context(who: Owner | None) -> dict:
    """The default seccomp filter, and for a non-root owner its uid, gid and `runAsNonRoot`.

    `fsGroup` is what the FUSE driver's fsGroup delegation keys on. The Hugging
    Face token's file needs none: the Secrets Store CSI driver writes it 0644
    unless the SecretProviderClass sets a mode (kubernetes-sigs/secrets-store-csi-driver
    pkg/secrets-store/nodeserver.go `permission`; manifests/token.py sets none).
    A root trainer (TPU, below) is not given a user.
    """
    if who is None:
        return dict(SECCOMP)
    return {"runAsUser": who.uid, "runAsGroup": who.gid, "fsGroup": who.gid, "runAsNonRoot": True, **SECCOMP}


def container_security_context() -> dict:
    """Every container's's securityContext: no privilege escalation, every capability dropped.

    The GPU trainer runs as uid 1000 and reaches the GPUs through world-accessible
    device files: its pod meets the restricted Pod Security Standard. The TPU
    trainer runs as root, the only way GKE documents TPU access: GKE's TPU
    device plugin hands the container the host's /dev/vfio nodes, and the
    container runtime keeps their host ownership unless it is configured to
    map it to the pod's runAsUser (containerd's
    `device_ownership_from_security_context`, off by default:
    https://kubernetes.io/blog/2021/11/09/non-root-containers-and-devices/);
    nothing documents GKE's nodes setting it. Root opens the nodes it owns by
    their owner bits, with no capability (capabilities(7): CAP_DAC_OVERRIDE
    only bypasses the permission bits), and VFIO's memory pinning is bounded
    by RLIMIT_MEMLOCK unless CAP_IPC_LOCK, which the runtime's default set
    (containerd pkg/oci `defaultUnixCaps`) never holds: dropping that set
    takes nothing TPU access uses. Such a pod meets the baseline standard,
    which admits root (admission/pod_security.py).
    """
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def platform_args(run: RunConfig, row: Trainer, contract: SchedulingContract, data_path: str | None = None,
                  mix_paths: tuple[str, ...] = ()) -> list[str]:
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
    mix = mix_flag(run, list(mix_paths or [s.data for s in run.mix]), DATA_DIR)
    return args + run.model_args(DATA_DIR) + run.data_flags() + mix + run.export_args(EXPORT_DIR)


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
        # The token is a file mounted from Secret Manager (manifests/token.py), never a literal here.
        variables.append({"name": "HF_TOKEN_PATH", "value": HF_TOKEN_FILE})
    if row.hf_cache_size:
        # Replaces the image's HF_HOME (the user's home, in the container's writable layer).
        variables.append({"name": "HF_HOME", "value": HF_CACHE_DIR})
    return variables + [env_entry(k, v) for k, v in sorted(run.env.items())]


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
        volumes.append(token_volume())
        mounts.append(token_mount())
    return volumes, mounts


# What the trainer leaves on a node for GKE's own DaemonSets (logging, metadata
# server, device plugin, CSI node drivers: under 1 vCPU and 2 GiB together on
# an accelerator node) and a few of the user's.
SYSTEM_HEADROOM_CPU = 2
SYSTEM_HEADROOM_MEMORY_GIB = 8
# Ephemeral storage of a trainer without a Hub cache: logs and scratch files.
SCRATCH_STORAGE = "10Gi"


def scratch_storage(row: Trainer) -> str:
    """The trainer's ephemeral storage: its logs and scratch files, and its Hub cache emptyDir where it has one
    (the kubelet counts a pod's emptyDirs against the sum of its containers' ephemeral-storage limits:
    https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#resource-ephemeral-storage-consumption)."""
    if not row.hf_cache_size:
        return SCRATCH_STORAGE
    return f"{quantity.gib(row.hf_cache_size) + quantity.gib(SCRATCH_STORAGE):g}Gi"


def resource_requests(row: Trainer, contract: SchedulingContract) -> dict[str, str]:
    """CPU, memory and ephemeral storage the trainer requests, and takes as its limits: what its node can give.

    The pod owns its VM (all of its chips), so it asks for the node's
    allocatable less the FUSE sidecar's requests (which hold the file cache
    where it is in memory), room for the node's DaemonSets and the memory
    model's margin; Autopilot would otherwise give it its small defaults, and
    sets limits equal to requests anyway.
    https://cloud.google.com/kubernetes-engine/docs/concepts/autopilot-resource-requests
    The trainer's own memory-backed /dev/shm is charged to the trainer (the
    cgroup that writes a tmpfs page owns it), so it is within this request.
    Ephemeral storage is `scratch_storage`.
    """
    return node_requests(contract, storage.sidecar_resources(contract), scratch_storage(row))


def node_requests(contract: SchedulingContract, sidecar: dict[str, str], ephemeral: str) -> dict[str, str]:
    """The requests of a pod that owns its VM: the node's allocatable less its FUSE sidecar's `sidecar`
    requests, room for the node's DaemonSets and the memory model's margin; on Autopilot, capped at what it
    admits for the accelerator. The pod's own memory-backed volumes are within it (charged to its cgroup)."""
    node = contract.allocatable
    cpu = node.cpu - float(quantity.parse(sidecar["cpu"])) - SYSTEM_HEADROOM_CPU
    # The capacity model's margin stays free too (core/allocatable.py, admission/fit.py).
    memory = (node.memory / quantity.GIB * (1 - MEMORY_MODEL_MARGIN) - quantity.gib(sidecar["memory"])
              - SYSTEM_HEADROOM_MEMORY_GIB)
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


def resources(row: Trainer, contract: SchedulingContract, chips: int) -> dict[str, dict[str, str]]:
    """The trainer container's requests and limits: equal, so that the pod is what its node was sized for.

    A memory limit equal to the request keeps the trainer within what the
    scheduler reserved; the CPU and ephemeral-storage limits make the pod
    countable by a namespace's ResourceQuota on `limits.*` (which refuses a
    pod whose containers do not set them) and by a LimitRange's maximums.
    https://kubernetes.io/docs/concepts/policy/resource-quotas/#requests-vs-limits
    """
    asked = {contract.resource_name: str(chips), **resource_requests(row, contract)}
    return {"limits": dict(asked), "requests": dict(asked)}


def ports(run: RunConfig, row: Trainer, contract: SchedulingContract) -> list[dict]:
    found = []
    if row.slice_port and contract.hosts_per_slice > 1:
        found.append(row.slice_port.container_port())
    if row.profile_port and run.profile:
        found.append(row.profile_port.container_port())
    return found


def grace_seconds(row: Trainer) -> int:
    return row.grace_seconds
