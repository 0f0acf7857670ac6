"""A dataset's staging Job as data: fetch the source into datasets/<stack>/<name>/, then (optionally) tokenize.

The Job runs on the cluster's system nodes (Standard) or general-purpose
Autopilot nodes, never on an accelerator, as the `stager` service account,
whose only write access is its datasets' `datasets/<stack>/<name>/`. The staging code is the project's
own (trainers/staging, standard library only); a dataset with `tokenize`
is then tokenized by the JAX trainer's own code, in its image, into the
token shards its runs read. A source no retry can fix exits 78 and fails
the Job at once; other failures are retried a few times.
https://kubernetes.io/docs/concepts/workloads/controllers/job/
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from core.catalog import NODEPOOL_LABEL
from core.names import APP_LABEL, DATASET_LABEL, PROJECT, SYSTEM_POOL
from core.trainers import CONFIG_ERROR, STAGING_MODULE, TRAINERS, WORKDIR, Trainer
from manifests import pod
from manifests.storage import CSI_DRIVER, WRITE_OPTIONS, Owner, fuse_annotations
from manifests.token import HF_TOKEN_FILE, token_mount, token_volume
from stack.config import StackConfig
from stack.datasets import TOKENS_DIR, DatasetConfig

DATASETS_DIR = "/datasets"
SOURCE_DIR = "/source"
# Hours a staging Job may run before it is failed (a stalled download).
DEADLINE_SECONDS = 6 * 3600
RETRIES = 3
_STAGE = {"cpu": "1", "memory": "2Gi", "ephemeral-storage": "2Gi"}
_TOKENIZE = {"cpu": "2", "memory": "8Gi", "ephemeral-storage": "2Gi"}
_SIDECAR = {"cpu": "250m", "memory": "512Mi", "ephemeral-storage": "5Gi"}


def stack_staging_jobs(config: StackConfig, images: Mapping[str, str]) -> dict[str, dict]:
    """The staging Job of each dataset of the stack, by dataset name, each in the image (trainer -> ref)
    of the trainer that stages it (StackConfig.staging_trainer)."""
    jobs = {}
    for dataset in (d for d in config.datasets if d.staged_in_cluster):  # a `path`: uploaded, no Job
        trainer = config.staging_trainer(dataset)
        jobs[dataset.name] = staging_job(dataset, trainer=TRAINERS[trainer], image=images[trainer],
                                         bucket=config.data_bucket, prefix=config.bucket_layout.dataset(dataset.name),
                                         autopilot=config.autopilot,
                                         namespace=config.runs_namespace, service_account=config.stager_account,
                                         system_pool=config.existing is None)
    return jobs


def job_name(dataset: DatasetConfig) -> str:
    return f"stage-{dataset.name}"


def staging_job(
    dataset: DatasetConfig, *, trainer: Trainer, image: str, bucket: str, prefix: str, autopilot: bool,
    namespace: str, service_account: str, system_pool: bool = True,
) -> dict:
    """`prefix`: the dataset's in the bucket (the Job's only writable mount). `system_pool`: on Standard,
    pinned to the platform's system node pool; an existing cluster's Job goes wherever the scheduler puts it
    (its accelerator nodes are tainted, which the Job doesn't tolerate)."""
    labels = {APP_LABEL: PROJECT, DATASET_LABEL: dataset.name}
    steps = [_stage_container(dataset, image)]
    if dataset.tokenize and trainer.token_shards_module:
        steps.append(_tokenize_container(dataset, image, trainer))
    *init, main = steps
    spec = {
        "serviceAccountName": service_account,
        "automountServiceAccountToken": False,
        "restartPolicy": "Never",
        "securityContext": pod.owner_security_context(staging_owner(trainer)),
        "containers": [main],
        "volumes": _volumes(dataset, bucket, prefix, trainer),
    }
    if init:
        spec["initContainers"] = init
    if system_pool and not autopilot:
        spec["nodeSelector"] = {NODEPOOL_LABEL: SYSTEM_POOL}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job_name(dataset), "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "backoffLimit": RETRIES,
            "activeDeadlineSeconds": DEADLINE_SECONDS,
            "podFailurePolicy": {"rules": [
                {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [CONFIG_ERROR]}},
            ]},
            "template": {"metadata": {"labels": labels, "annotations": fuse_annotations(_SIDECAR)}, "spec": spec},
        },
    }


def _container(name: str, image: str, command: list[str], resources: dict, mounts: list[dict]) -> dict:
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "workingDir": WORKDIR,
        "command": command,
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}],
        "resources": {"requests": dict(resources), "limits": dict(resources)},
        "volumeMounts": mounts,
        "securityContext": pod.container_security_context(),
    }


def _stage_container(dataset: DatasetConfig, image: str) -> dict:
    command = ["python", "-m", STAGING_MODULE, "--source", json.dumps(dataset.source_spec(SOURCE_DIR)),
               "--dest", f"{DATASETS_DIR}/{dataset.name}"]
    mounts = [{"name": "dataset", "mountPath": f"{DATASETS_DIR}/{dataset.name}"}]
    if dataset.gcs:
        mounts.append({"name": "source", "mountPath": SOURCE_DIR, "readOnly": True})
    if dataset.hub and dataset.hub.token:
        command += ["--token-file", HF_TOKEN_FILE]
        mounts.append(token_mount())
    return _container("stage", image, command, _STAGE, mounts)


def _tokenize_container(dataset: DatasetConfig, image: str, trainer: Trainer) -> dict:
    root = f"{DATASETS_DIR}/{dataset.name}"
    command = ["python", "-m", trainer.token_shards_module, "--text", f"{root}/{dataset.staged_file}",
               "--out", f"{root}/{TOKENS_DIR}", "--model", dataset.tokenize]
    return _container("tokenize", image, command, _TOKENIZE, [{"name": "dataset", "mountPath": root}])


def staging_owner(trainer: Trainer) -> Owner:
    """Who a staging Job runs as: its image's non-root account, whatever the trainer runs as.

    Staging reads and writes files and the network and tokenizes on the CPU; it
    touches no accelerator, so even in the root TPU trainer's image it runs as
    the account the image creates for such work (core/trainers.py `jobs_user`),
    and its pod meets the restricted Pod Security Standard.
    """
    if trainer.image.jobs_user is None:
        raise ValueError(f"trainer {trainer.name}: its image has no non-root account for staging Jobs (jobs_user)")
    return Owner(trainer.image.jobs_user, trainer.image.jobs_user)


def _volumes(dataset: DatasetConfig, bucket: str, prefix: str, trainer: Trainer) -> list[dict]:
    ids = staging_owner(trainer).mount_options
    options = ",".join((*WRITE_OPTIONS, *ids, f"only-dir={prefix}"))
    volumes = [{"name": "dataset", "csi": {"driver": CSI_DRIVER, "readOnly": False,
                                          "volumeAttributes": {"bucketName": bucket, "mountOptions": options}}}]
    if dataset.gcs:
        source = ",".join(("implicit-dirs", *ids, *((f"only-dir={dataset.gcs_prefix}",) if dataset.gcs_prefix else ())))
        volumes.append({"name": "source", "csi": {"driver": CSI_DRIVER, "readOnly": True, "volumeAttributes": {
            "bucketName": dataset.gcs_bucket, "mountOptions": source}}})
    if dataset.hub and dataset.hub.token:
        volumes.append(token_volume())
    return volumes
