"""The run's view of the bucket: GCS FUSE CSI ephemeral volumes, one per prefix.

Each volume mounts one prefix of the platform bucket through the Cloud Storage
FUSE sidecar GKE injects into pods annotated `gke-gcsfuse/volumes: "true"`;
the sidecar authenticates as the pod's Kubernetes service account (Workload
Identity), whose Google identity may read the bucket and write only below
the run's `checkpoints/<stack>/<run>/` and `profiles/<stack>/<run>/` (core/names.py).
https://cloud.google.com/kubernetes-engine/docs/how-to/cloud-storage-fuse-csi-driver-ephemeral
"""

from __future__ import annotations

from dataclasses import dataclass

from core import quantity
from core.catalog import Family
from core.contract import SchedulingContract
from core.names import RunPrefixes

CSI_DRIVER = "gcsfuse.csi.storage.gke.io"

DATA_DIR = "/data"
CHECKPOINT_DIR = "/checkpoints"
PROFILE_DIR = "/profiles"
# A run with `export:` writes its model here: its `exports/<stack>/<run>/` (core/names.py export_prefix).
EXPORT_DIR = "/exports"

# Reads of the training data: the GKE tutorial's file cache with parallel downloads,
# so every epoch after the first reads from the cache. Its size is capped
# (`cache_plan`): an uncapped cache fills whatever holds it.
# https://cloud.google.com/kubernetes-engine/docs/how-to/cloud-storage-fuse-csi-driver-perf
DATA_OPTIONS = (
    "implicit-dirs",
    "file-cache:enable-parallel-downloads:true",
    "file-cache:parallel-downloads-per-file:100",
    "file-cache:max-parallel-downloads:-1",
    "file-cache:download-chunk-size-mb:10",
)
# Writes (checkpoints, profiles) go straight to GCS: no file cache, and no
# metadata cache, so that a host listing the prefix to resume sees every
# checkpoint the other hosts and earlier attempts finished.
WRITE_OPTIONS = (
    "implicit-dirs",
    "file-cache:max-size-mb:0",
    "metadata-cache:ttl-secs:0",
)

# The FUSE sidecar's own resources (the cache's are added where it holds it, `sidecar_resources`), and the
# pod volume its file cache goes to when not the sidecar's own emptyDir (that name tells the webhook to use it).
# Two CPUs: with its limit equal to its request, it streams the data and checkpoint writes unthrottled on
# accelerator VMs of 44 to 224 vCPUs.
SIDECAR_CPU = "2"
SIDECAR_MEMORY = "1Gi"
SIDECAR_EPHEMERAL_GIB = 5  # logs and buffers; the driver's own default
CACHE_VOLUME = "gke-gcsfuse-cache"
SIDECAR_PREFIX = "gke-gcsfuse/"


@dataclass(frozen=True)
class CachePlan:
    """Where the data file cache lives on a pool's nodes, and how large it may grow.

    TPU hosts: in memory, a `gke-gcsfuse-cache` emptyDir of medium Memory, as
    GKE recommends for TPU v6e and later (their boot disk is the slowest
    place; they have 176 GiB and more of RAM). Nodes whose ephemeral storage
    is local SSD (A4): the sidecar's own emptyDir there, counted in its
    ephemeral-storage request. The cache is capped below its volume:
    `file-cache:max-size-mb` must stay under the volume's size (or the
    sidecar's ephemeral-storage limit).
    https://cloud.google.com/kubernetes-engine/docs/how-to/cloud-storage-fuse-csi-driver-perf#cache-medium
    """

    gib: int
    in_memory: bool

    @property
    def max_size_mb(self) -> int:
        return (self.gib - 1) * 1024  # a GiB under the volume, for the cache's own metadata


TPU_CACHE = CachePlan(gib=32, in_memory=True)
LOCAL_SSD_CACHE = CachePlan(gib=20, in_memory=False)


def cache_plan(contract: SchedulingContract) -> CachePlan:
    return TPU_CACHE if contract.family is Family.TPU else LOCAL_SSD_CACHE


def sidecar_resources(contract: SchedulingContract, file_cache: bool = True) -> dict[str, str]:
    """The FUSE sidecar's requests, which are also its limits: its own, and the file cache it fills.

    The cache's pages are charged to the container that writes them (the
    sidecar): on local SSD to its ephemeral storage, in memory (a tmpfs
    emptyDir, TPU hosts) to its memory, since a tmpfs page belongs to the
    memory cgroup that first touched it ("Memory Ownership",
    https://docs.kernel.org/admin-guide/cgroup-v2.html#memory-ownership). With
    a memory limit equal to its request, the request holds the cache.
    `file_cache=False`: a pod whose mounts keep no file cache (a model server reads its weights once).
    """
    cache = cache_plan(contract) if file_cache else CachePlan(gib=0, in_memory=False)
    return {"cpu": SIDECAR_CPU,
            "memory": f"{quantity.gib(SIDECAR_MEMORY) + (cache.gib if cache.in_memory else 0):g}Gi",
            "ephemeral-storage": f"{SIDECAR_EPHEMERAL_GIB + (0 if cache.in_memory else cache.gib)}Gi"}


def fuse_annotations(resources: dict[str, str]) -> dict[str, str]:
    """GKE's sidecar injection and the sidecar's requests and limits, each limit equal to its request.

    Limits make a namespace's ResourceQuota on `limits.*` and a LimitRange's
    maximums admit the pod (a quota on a resource refuses a pod with a
    container that does not set it), and a memory limit equal to the request
    is what the scheduler placed. The annotations are GKE's:
    https://cloud.google.com/kubernetes-engine/docs/how-to/cloud-storage-fuse-csi-driver-sidecar#configure-sidecar-resources
    """
    annotations = {"gke-gcsfuse/volumes": "true"}
    annotations.update({f"{SIDECAR_PREFIX}{name}-limit": value for name, value in resources.items()})
    annotations.update({f"{SIDECAR_PREFIX}{name}-request": value for name, value in resources.items()})
    return annotations


def sidecar_annotations(contract: SchedulingContract) -> dict[str, str]:
    """A run pod's FUSE sidecar: injected, with `sidecar_resources` as requests and limits."""
    return fuse_annotations(sidecar_resources(contract))


def cache_volumes(contract: SchedulingContract) -> list[dict]:
    """The pod volume holding the data cache, where it is not the sidecar's own."""
    cache = cache_plan(contract)
    if not cache.in_memory:
        return []
    return [{"name": CACHE_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": f"{cache.gib}Gi"}}]


@dataclass(frozen=True)
class Owner:
    """The uid/gid a non-root trainer runs as, which must own its FUSE mounts.

    A GCS FUSE mount belongs to root unless its options say otherwise, so a
    non-root trainer could not write checkpoints into it. GKE's driver docs:
    a pod that sets runAsUser/runAsGroup, or whose image runs as non-root,
    must pass the `uid`/`gid` mount options; with the pod's `fsGroup` set,
    the driver's fsGroup delegation adds the matching file and directory modes.
    https://github.com/GoogleCloudPlatform/gcs-fuse-csi-driver/blob/main/docs/authentication.md
    """

    uid: int
    gid: int

    @property
    def mount_options(self) -> tuple[str, ...]:
        return (f"uid={self.uid}", f"gid={self.gid}")


@dataclass(frozen=True)
class Mount:
    """One bucket prefix, where the trainer sees it, and whether it writes there."""

    volume: str
    prefix: str
    path: str
    writable: bool


def run_mounts(prefixes: RunPrefixes, export_prefix: str | None = None) -> tuple[Mount, ...]:
    """The prefixes a run sees: its stack's datasets read-only; its own checkpoints and profiles read-write,
    and its export (`exports/<stack>/<run>`) where it has `export:`.

    Every run gets its profiles prefix, where the trainer writes its TensorBoard
    events (and traces): a path inside the container would be lost with the pod.
    The mount paths are the same whatever the prefixes, so the trainers' flags are too.
    """
    mounts = (
        Mount("data", prefixes.data, DATA_DIR, writable=False),
        Mount("checkpoints", prefixes.checkpoints, CHECKPOINT_DIR, writable=True),
        Mount("profiles", prefixes.profiles, PROFILE_DIR, writable=True),
    )
    return mounts + ((Mount("exports", export_prefix, EXPORT_DIR, writable=True),) if export_prefix else ())


def volume(mount: Mount, bucket: str, host_network: bool, owner: Owner | None = None,
           cache: CachePlan = LOCAL_SSD_CACHE, options: tuple[str, ...] | None = None) -> dict:  # fmt: skip
    """The CSI ephemeral volume of `mount`; `owner` for a trainer that does not run as root; `options`
    instead of the data's (read) or the checkpoints' (written) mount options."""
    reads = (*DATA_OPTIONS, f"file-cache:max-size-mb:{cache.max_size_mb}")
    if options is None:
        options = WRITE_OPTIONS if mount.writable else reads
    options = (
        *options,
        *(owner.mount_options if owner else ()),
        f"only-dir={mount.prefix}",
    )
    attributes = {"bucketName": bucket, "mountOptions": ",".join(options)}
    if host_network:
        # A hostNetwork pod has no pod network identity of its own; this tells
        # the driver to authenticate with the pod's service account token.
        # https://cloud.google.com/kubernetes-engine/docs/how-to/cloud-storage-fuse-csi-driver-setup#host-network
        attributes["hostNetworkPodKSA"] = "true"
    return {
        "name": mount.volume,
        "csi": {"driver": CSI_DRIVER, "readOnly": not mount.writable, "volumeAttributes": attributes},
    }


def volume_mount(mount: Mount) -> dict:
    return {"name": mount.volume, "mountPath": mount.path, "readOnly": not mount.writable}
