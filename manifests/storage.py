"""The run's view of the bucket: GCS FUSE CSI ephemeral volumes, one per prefix.

Each volume mounts one prefix of the platform bucket through the Cloud Storage
FUSE sidecar GKE injects into pods annotated `gke-gcsfuse/volumes: "true"`;
the sidecar authenticates as the pod's Kubernetes service account (Workload
Identity), whose Google identity may read `datasets/` and write only below
`checkpoints/<run>/` and `profiles/<run>/`.
https://cloud.google.com/kubernetes-engine/docs/how-to/cloud-storage-fuse-csi-driver-ephemeral
"""

from __future__ import annotations

from dataclasses import dataclass

from core.names import CHECKPOINT_PREFIX, DATA_PREFIX, PROFILE_PREFIX

CSI_DRIVER = "gcsfuse.csi.storage.gke.io"

DATA_DIR = "/data"
CHECKPOINT_DIR = "/checkpoints"
PROFILE_DIR = "/profiles"

# Reads of the training data: the GKE tutorial's file cache with parallel downloads,
# so every epoch after the first reads from local disk.
# https://cloud.google.com/kubernetes-engine/docs/how-to/cloud-storage-fuse-csi-driver-perf
DATA_OPTIONS = (
    "implicit-dirs",
    "file-cache:enable-parallel-downloads:true",
    "file-cache:parallel-downloads-per-file:100",
    "file-cache:max-parallel-downloads:-1",
    "file-cache:download-chunk-size-mb:10",
    "file-cache:max-size-mb:-1",
)
# Writes (checkpoints, profiles) go straight to GCS: no file cache, and no
# metadata cache, so that a host listing the prefix to resume sees every
# checkpoint the other hosts and earlier attempts finished.
WRITE_OPTIONS = (
    "implicit-dirs",
    "file-cache:max-size-mb:0",
    "metadata-cache:ttl-secs:0",
)

# The sidecar's resources. "0" removes the limit, so the sidecar is never
# throttled, OOM-killed or evicted for its own limit while it streams data; the
# requests reserve what it needs, the ephemeral storage being the file cache.
# https://cloud.google.com/kubernetes-engine/docs/how-to/cloud-storage-fuse-csi-driver-sidecar#configure-sidecar-resources
SIDECAR_ANNOTATIONS = {
    "gke-gcsfuse/volumes": "true",
    "gke-gcsfuse/cpu-limit": "0",
    "gke-gcsfuse/memory-limit": "0",
    "gke-gcsfuse/ephemeral-storage-limit": "0",
    "gke-gcsfuse/cpu-request": "500m",
    "gke-gcsfuse/memory-request": "1Gi",
    "gke-gcsfuse/ephemeral-storage-request": "50Gi",
}


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


def run_mounts(run_name: str) -> tuple[Mount, ...]:
    """The prefixes a run sees: data read-only; its own checkpoints and profiles read-write.

    Every run gets its profiles prefix, where the trainer writes its TensorBoard
    events (and traces): a path inside the container would be lost with the pod.
    """
    return (
        Mount("data", DATA_PREFIX, DATA_DIR, writable=False),
        Mount("checkpoints", f"{CHECKPOINT_PREFIX}/{run_name}", CHECKPOINT_DIR, writable=True),
        Mount("profiles", f"{PROFILE_PREFIX}/{run_name}", PROFILE_DIR, writable=True),
    )


def volume(mount: Mount, bucket: str, host_network: bool, owner: Owner | None = None) -> dict:
    """The CSI ephemeral volume of `mount`; `owner` for a trainer that does not run as root."""
    options = (
        *(WRITE_OPTIONS if mount.writable else DATA_OPTIONS),
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
