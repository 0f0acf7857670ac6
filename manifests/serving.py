"""`serve:` as plain dicts: the vLLM Deployment and Service of a run's export, and the priority its pods run at.

What GKE's own guides declare to serve Gemma with vLLM, on GPUs
(https://cloud.google.com/kubernetes-engine/docs/tutorials/serve-gemma-gpu-vllm, its manifests in
GoogleCloudPlatform/kubernetes-engine-samples ai-ml/llm-serving-gemma/vllm/) and on TPUs
(https://cloud.google.com/kubernetes-engine/docs/tutorials/serve-vllm-tpu): vLLM's OpenAI-compatible server on
port 8000, every chip of one host in tensor parallelism, a bounded context, a memory-backed /dev/shm, a
ClusterIP Service. Here the model is the run's export, mounted read-only through Cloud Storage FUSE (its
prefix alone, `only-dir`), under a service account that may read nothing else of the bucket's content; an
init container holds the server until the export's marker is there (trainers/export_dir.py), so a server
declared before its run has finished waits for it instead of failing.

Priority: the servers run below every run (`PRIORITY_VALUE`), so a run that needs the VM a server holds
preempts it (the scheduler's default preemption, https://kubernetes.io/docs/concepts/scheduling-eviction/pod-priority-preemption/),
and a server waiting for its own run's export never keeps that run from the pool's only VM. The value stays
above the cluster autoscaler's expendable cutoff (-10), so a pending server still scales its pool up
(https://github.com/kubernetes/autoscaler/blob/master/cluster-autoscaler/FAQ.md, "How does Cluster Autoscaler
work with Pod Priority and Preemption?"). `preemptionPolicy: Never`: a server never evicts anything itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from core.catalog import Family
from core.contract import SchedulingContract
from core.names import APP_LABEL, PROJECT, SERVE_LABEL, cluster_scoped, server_name
from core.quantity import GIB
from manifests import pod, storage
from manifests.run import SKIP_AWAIT
from stack.serving import ServeConfig
from trainers.export_dir import MARKER as EXPORT_MARKER

PORT = 8000
PORT_NAME = "http"
MODEL_DIR = "/model"
CACHE_DIR = "/var/cache/vllm"
SERVER = "vllm"
WAIT = "wait-for-export"
PRIORITY_VALUE = -5
# vLLM's share of each chip's memory for weights, activations and its KV cache: its default, passed explicitly
# so that the server and the fit rule (admission/serving.py) agree.
GPU_MEMORY_UTILIZATION = 0.9
SHM_SIZE = "16Gi"  # tensor parallelism's shared memory (NCCL on GPU); GKE's guides mount a memory /dev/shm
CACHE_SIZE = "20Gi"  # vLLM's compile caches (torch.compile, Triton, XLA) and HOME
EPHEMERAL = "30Gi"  # the cache volume and the container's writable layer
# The model read once, straight from Cloud Storage: no file cache to fill (the mount's options), a stat cache
# so that the export's files are looked up once, and the prefix alone.
MODEL_OPTIONS = ("implicit-dirs", "file-cache:max-size-mb:0", "metadata-cache:ttl-secs:60")

# The startup probe's budget: the weights read at READ_MIB_PER_SECOND, a floor for one reader through Cloud
# Storage FUSE without a file cache (gcsfuse's published figures are far higher: 13 GB/s sequential reads with
# 10 readers on a 200 Gbps VM, GoogleCloudPlatform/gcsfuse docs/benchmarks.md), then vLLM's warm-up: CUDA graphs
# and torch.compile on GPU, XLA compiling every token bucket on TPU.
READ_MIB_PER_SECOND = 100
WARM_UP_SECONDS = {Family.GPU: 600, Family.TPU: 1200}
STARTUP_PERIOD_SECONDS = 10


@dataclass(frozen=True)
class ServeFacts:
    """What the platform gives the server: where the export is, who reads it, what the model weighs."""

    bucket: str
    namespace: str  # the stack's
    service_account: str  # the stack's server account (StackConfig.server_account)
    export_prefix: str  # exports/<stack>/<run>
    # The weights as served, for the startup budget; None: a model the platform has no shapes of.
    weights_bytes: int | None
    dtype: str = "bfloat16"  # vLLM's --dtype: the export's, 16-bit
    extra_labels: Mapping[str, str] = field(default_factory=dict)


def startup_seconds(weights_bytes: int | None, contract: SchedulingContract) -> int:
    """How long the server may take to answer /health: its weights read, then its warm-up. An unknown model is
    budgeted as large as the host's chips could hold."""
    if weights_bytes is None:
        weights_bytes = int(contract.chips_per_host * contract.shape.accelerator.hbm_gib_per_chip * GIB)
    return math.ceil(weights_bytes / (READ_MIB_PER_SECOND * 2**20)) + WARM_UP_SECONDS[contract.family]


def priority_class_name(namespace: str) -> str:
    return cluster_scoped(namespace, "serving")


def server_manifests(serve: ServeConfig, contract: SchedulingContract, facts: ServeFacts) -> dict[str, dict]:
    """The stack's server objects by `<kind>-<name>` (the file names of the plan and the goldens)."""
    name = server_name(serve.run)
    return {
        f"priorityclass-{priority_class_name(facts.namespace)}": priority_class(facts.namespace),
        f"deployment-{name}": deployment(serve, contract, facts),
        f"service-{name}": service(serve, facts),
    }


def priority_class(namespace: str) -> dict:
    return {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": priority_class_name(namespace), "labels": {APP_LABEL: PROJECT}},
        "value": PRIORITY_VALUE, "preemptionPolicy": "Never", "globalDefault": False,
        "description": "Model servers: below every run, which preempts them; they preempt nothing.",
    }


def labels(serve: ServeConfig, facts: ServeFacts) -> dict[str, str]:
    return {APP_LABEL: PROJECT, SERVE_LABEL: serve.run, **facts.extra_labels}


def service(serve: ServeConfig, facts: ServeFacts) -> dict:
    """A ClusterIP Service: reached inside the cluster, or from a laptop through `make chat`'s port-forward."""
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": server_name(serve.run), "namespace": facts.namespace, "labels": labels(serve, facts),
                     "annotations": dict(SKIP_AWAIT)},
        "spec": {"type": "ClusterIP", "selector": {SERVE_LABEL: serve.run},
                 "ports": [{"name": PORT_NAME, "port": PORT, "targetPort": PORT_NAME, "protocol": "TCP"}]},
    }


def deployment(serve: ServeConfig, contract: SchedulingContract, facts: ServeFacts) -> dict:
    meta = labels(serve, facts)
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        # Not awaited by `pulumi up`: the server waits for its run's export, which may be hours away
        # (https://www.pulumi.com/registry/packages/kubernetes/api-docs/apps/v1/deployment/).
        "metadata": {"name": server_name(serve.run), "namespace": facts.namespace, "labels": meta,
                     "annotations": dict(SKIP_AWAIT)},
        "spec": {
            "replicas": serve.replicas,
            "selector": {"matchLabels": {SERVE_LABEL: serve.run}},
            # One server down before the next is made: no second VM of accelerators is needed to roll out.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": dict(meta), "annotations": storage.fuse_annotations(sidecar(contract))},
                "spec": pod_spec(serve, contract, facts),
            },
        },
    }


def sidecar(contract: SchedulingContract) -> dict[str, str]:
    """The FUSE sidecar's requests and limits: no file cache, since the server reads its weights once."""
    return storage.sidecar_resources(contract, file_cache=False)


def owner(contract: SchedulingContract) -> storage.Owner | None:
    """Who the server runs as: uid/gid 1000 on GPU (the NVIDIA device files are world-accessible, as for the GPU
    trainer), root on TPU (the only TPU access GKE documents, as for the TPU trainer: manifests/pod.py)."""
    return storage.Owner(1000, 1000) if contract.family is Family.GPU else None


def pod_spec(serve: ServeConfig, contract: SchedulingContract, facts: ServeFacts) -> dict:
    who = owner(contract)
    mount = storage.Mount("model", facts.export_prefix, MODEL_DIR, writable=False)
    security = dict(pod.SECCOMP) if who is None else {
        "runAsUser": who.uid, "runAsGroup": who.gid, "fsGroup": who.gid, "runAsNonRoot": True, **pod.SECCOMP}
    return {
        "serviceAccountName": facts.service_account,
        # The server never calls the Kubernetes API; Workload Identity needs no token here (manifests/run.py).
        "automountServiceAccountToken": False,
        "priorityClassName": priority_class_name(facts.namespace),
        "terminationGracePeriodSeconds": 60,
        "nodeSelector": contract.pod_node_selector,
        "tolerations": [dict(t) for t in contract.pod_tolerations],
        "securityContext": security,
        "initContainers": [wait_container(serve, facts, who)],
        "containers": [server_container(serve, contract, facts, who)],
        "volumes": [
            storage.volume(mount, facts.bucket, False, who, options=MODEL_OPTIONS),
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_SIZE}},
            {"name": "cache", "emptyDir": {"sizeLimit": CACHE_SIZE}},
        ],
    }


def container_security(who: storage.Owner | None) -> dict:
    """As the trainers' (manifests/pod.py): every capability dropped when not root, NET_RAW when root."""
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"] if who else ["NET_RAW"]}}


def wait_container(serve: ServeConfig, facts: ServeFacts, who: storage.Owner | None) -> dict:
    """Holds the pod until the run's export is complete: its marker is written last (trainers/export_dir.py)."""
    marker = f"{MODEL_DIR}/{EXPORT_MARKER}"
    script = (f'until [ -f {marker} ]; do echo "waiting for the export of run {serve.run} '
              f'(gs://{facts.bucket}/{facts.export_prefix}/{EXPORT_MARKER})"; sleep 30; done')
    small = {"cpu": "100m", "memory": "64Mi"}
    return {
        "name": WAIT, "image": serve.image, "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", script],
        "resources": {"requests": dict(small), "limits": dict(small)},
        "volumeMounts": [{"name": "model", "mountPath": MODEL_DIR, "readOnly": True}],
        "securityContext": container_security(who),
    }


def vllm_args(serve: ServeConfig, contract: SchedulingContract, facts: ServeFacts) -> list[str]:
    """`vllm serve`'s flags (https://docs.vllm.ai/en/latest/cli/serve.html): the export as the model, served
    under the run's name, over every chip of the host."""
    return [
        "--model", MODEL_DIR, "--served-model-name", serve.run,
        "--tensor-parallel-size", str(contract.chips_per_host),
        "--max-model-len", str(serve.max_model_len), "--dtype", facts.dtype,
        "--gpu-memory-utilization", str(GPU_MEMORY_UTILIZATION),
        "--host", "0.0.0.0", "--port", str(PORT),
    ]


def server_env(contract: SchedulingContract) -> list[dict]:
    """Caches in the pod's cache volume, nothing fetched from the Hub, no usage report sent
    (https://docs.vllm.ai/en/latest/usage/usage_stats.html)."""
    env = {
        "HOME": CACHE_DIR, "XDG_CACHE_HOME": CACHE_DIR, "VLLM_CACHE_ROOT": f"{CACHE_DIR}/vllm",
        "HF_HOME": f"{CACHE_DIR}/huggingface", "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
    }
    if contract.family is Family.TPU:
        # XLA's compiled programs, kept across a container restart (https://docs.vllm.ai/en/latest/configuration/env_vars.html).
        env["VLLM_XLA_CACHE_PATH"] = f"{CACHE_DIR}/xla"
    else:
        # A uid the image has no passwd entry for: getpass.getuser() (torch's compile cache) reads USER first.
        env["USER"] = "vllm"
    return [{"name": k, "value": v} for k, v in sorted(env.items())]


def _probe(period: int, failures: int, timeout: int) -> dict:
    # vLLM's /health: 200 once its engine runs, 503 once it is dead
    # (vllm-project/vllm vllm/entrypoints/serve/instrumentator/health.py).
    return {"httpGet": {"path": "/health", "port": PORT_NAME}, "periodSeconds": period,
            "failureThreshold": failures, "timeoutSeconds": timeout}


def server_container(serve: ServeConfig, contract: SchedulingContract, facts: ServeFacts,
                     who: storage.Owner | None) -> dict:
    chips = {contract.resource_name: str(contract.chips_per_host)}
    # The host less the sidecar; /dev/shm and the cache volume are charged within (manifests/pod.py).
    requests = pod.node_requests(contract, sidecar(contract), EPHEMERAL)
    budget = startup_seconds(facts.weights_bytes, contract)
    return {
        "name": SERVER, "image": serve.image, "imagePullPolicy": "IfNotPresent",
        "command": ["vllm", "serve"],
        "args": vllm_args(serve, contract, facts),
        "env": server_env(contract),
        "ports": [{"name": PORT_NAME, "containerPort": PORT, "protocol": "TCP"}],
        # The accelerator exactly as the pool's contract has it; limits equal to requests, as the trainers'
        # (a namespace's ResourceQuota on `limits.*` counts the pod: manifests/pod.py `resources`).
        "resources": {"requests": {**chips, **requests}, "limits": {**chips, **requests}},
        "startupProbe": _probe(STARTUP_PERIOD_SECONDS, math.ceil(budget / STARTUP_PERIOD_SECONDS), 5),
        "readinessProbe": _probe(5, 3, 5),
        "livenessProbe": _probe(30, 4, 10),
        "volumeMounts": [{"name": "model", "mountPath": MODEL_DIR, "readOnly": True},
                         {"name": "dshm", "mountPath": "/dev/shm"},
                         {"name": "cache", "mountPath": CACHE_DIR}],
        "securityContext": container_security(who),
    }
