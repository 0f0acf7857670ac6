"""Names the platform creates and the runs refer to, and the versions it pins. Pure data."""

from core.ids import bounded, slug

# The Pulumi project (Pulumi.yaml `name`), and so the namespace of its config keys.
PROJECT = "gke-finetune"

# The default Kubernetes namespace of a stack that declares its own cluster: it
# holds the stack's service accounts, the Hugging Face token Secret and every run.
# A stack sets another with `namespace` (an existing cluster's stack must).
RUNS_NAMESPACE = "finetune"
# Kubernetes Secret holding the Hugging Face token, and its key.
HF_TOKEN_SECRET = "hf-token"
HF_TOKEN_KEY = "token"

# Bucket layout. Runs read `datasets/` and write only below their own
# `checkpoints/<run>/` and `profiles/<run>/`.
DATA_PREFIX = "datasets"
CHECKPOINT_PREFIX = "checkpoints"
PROFILE_PREFIX = "profiles"
# A run's exported model (its `export:`), written when training succeeds, read by `make download` and a
# stack's `serve:`; below it the stack's name, so two stacks sharing a bucket never write one export.
EXPORT_PREFIX = "exports"


def export_prefix(stack: str, run: str) -> str:
    """Where a run's export goes in the bucket: `exports/<stack>/<run>` (no trailing '/')."""
    return f"{EXPORT_PREFIX}/{stack}/{run}"


# Node label every accelerator pool carries with its logical pool name, so a
# run selects exactly its pool (all slices of it), whatever GKE names the
# node pools.
POOL_LABEL = "gke-finetune/pool"

# The environment variable naming the run in its trainer container (the trainers' progress
# records carry it: trainers/*/progress.py RUN_ENV).
RUN_ENV = "GKE_FINETUNE_RUN"

# The label of a namespace a stack declares (`createNamespace`, or the stack's own cluster's): the stack's
# name, which tells a later `up` of the stack its own namespace from another's (admission/shared_cluster.py).
STACK_LABEL = "gke-finetune/stack"


def stack_label_value(stack: str) -> str:
    """The stack's name as a label value (at most 63 characters)."""
    return bounded(stack, 63)

# Labels every run's JobSet (and its pods) carries.
APP_LABEL = "app.kubernetes.io/name"
RUN_LABEL = "gke-finetune/run"

# --- pinned versions ---------------------------------------------------------
# JobSet: the release whose CRD the manifests are built for and validated
# against. Its Helm chart on registry.k8s.io is versioned without the `v`.
# https://jobset.sigs.k8s.io/docs/installation/
JOBSET_VERSION = "v0.12.0"
JOBSET_CHART = "oci://registry.k8s.io/jobset/charts/jobset"
JOBSET_CHART_VERSION = JOBSET_VERSION.removeprefix("v")
JOBSET_NAMESPACE = "jobset-system"
# The Kubernetes minor the child Jobs are checked against (GKE's regular channel).
KUBERNETES_VERSION = "1.33.0"

# The one replicated job of every run's JobSet; part of every pod hostname.
REPLICATED_JOB = "trainer"

DATASET_LABEL = "gke-finetune/dataset"

# Kueue: the queueing controller a stack installs when a run needs it (a queued
# pool, a capacity ladder or a priority). The chart on registry.k8s.io is
# versioned without the `v`; the values it is installed with are in
# manifests/controllers.py. https://kueue.sigs.k8s.io/docs/installation/
KUEUE_VERSION = "v0.19.2"
KUEUE_CHART = "oci://registry.k8s.io/kueue/charts/kueue"
KUEUE_CHART_VERSION = KUEUE_VERSION.removeprefix("v")
KUEUE_NAMESPACE = "kueue-system"
# The LocalQueue runs are submitted to, in the stack's namespace (the stack's one
# ClusterQueue is named after the namespace: `cluster_scoped`).
LOCAL_QUEUE = "finetune"
# The WorkloadPriorityClasses a run's `priority` may name, with their values:
# a higher value preempts a lower one in the same queue.
WORKLOAD_PRIORITIES = {"low": 100, "normal": 500, "high": 1000}
# The most GKE lets queued (ProvisioningRequest) capacity run, and its default:
# 7 days. https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest
MAX_RUN_DURATION_SECONDS = 7 * 24 * 3600


def trainer_service_account(stack: str) -> str:
    """The Kubernetes service account a stack's runs run as.

    Named after the stack: Workload Identity Federation for GKE knows a Kubernetes service account by
    project, namespace and name only ("identity sameness": the same namespace and name in two clusters
    of one project are one IAM principal,
    https://cloud.google.com/kubernetes-engine/docs/concepts/workload-identity#identity_sameness), so
    two stacks' clusters in one project must not share a name and namespace, or each stack's grants
    would reach the other's pods."""
    return f"{slug(stack)}-trainer"


def stager_service_account(stack: str) -> str:
    """The Kubernetes service account a stack's dataset staging Jobs run as (its principal writes below
    datasets/ only); named after the stack for the reason `trainer_service_account` gives."""
    return f"{slug(stack)}-stager"


def server_service_account(stack: str) -> str:
    """The Kubernetes service account a stack's model server (`serve:`) runs as; its principal may read the
    served run's export and nothing else it could write (components/serving.py). Named after the stack for the
    reason `trainer_service_account` gives."""
    return f"{slug(stack)}-server"


def server_name(run: str) -> str:
    """The Deployment and Service of the server of `run`'s export (a DNS-1035 label, as a Service's name must
    be: https://kubernetes.io/docs/concepts/services-networking/service/#defining-a-service)."""
    return bounded(f"serve-{run}", 63)


# The label of a model server's Deployment, pods and Service selector: the run whose export it serves.
SERVE_LABEL = "gke-finetune/serve"


def cluster_scoped(namespace: str, name: str = "") -> str:
    """The name of a cluster-scoped object a stack declares (ClusterQueue, ResourceFlavor, AdmissionCheck,
    ProvisioningRequestConfig, WorkloadPriorityClass, ComputeClass): prefixed with the stack's namespace,
    so two stacks that share a cluster (each in its own namespace) never declare the same object."""
    # Label values (a WorkloadPriorityClass or ComputeClass name in a run's labels) are at most 63.
    return bounded(f"{namespace}-{name}", 63) if name else namespace


def compute_class_name(namespace: str, run: str) -> str:
    """The ComputeClass of an Autopilot run's capacity ladder (cluster-scoped; `ladder-` keeps it
    clear of GKE's own classes, such as `autopilot` and `autopilot-spot`)."""
    return cluster_scoped(namespace, f"ladder-{run}")
