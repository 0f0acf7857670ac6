"""Names the platform creates and the runs refer to, and the versions it pins. Pure data."""

import hashlib
import json
from dataclasses import dataclass

from core.ids import bounded, slug

# The Pulumi project (Pulumi.yaml `name`), and so the namespace of its config keys.
PROJECT = "gke-finetune"

# The default Kubernetes namespace of a stack that declares its own cluster: it
# holds the stack's service accounts, the Hugging Face token's SecretProviderClass and every run.
# A stack sets another with `namespace` (an existing cluster's stack must).
RUNS_NAMESPACE = "finetune"
# The node pool a Standard cluster the platform creates keeps its system pods on (components/cluster.py), where
# the platform's own CPU-only pods go too (staging, the ladder controller).
SYSTEM_POOL = "system"
# The Hugging Face token: the Secret Manager secret that holds it by default (`hfTokenSecret`), the
# SecretProviderClass in the runs' namespace that mounts it, and the file it is mounted as.
HF_TOKEN_SECRET = "hf-token"
HF_TOKEN_PROVIDER_CLASS = "hf-token"
HF_TOKEN_KEY = "token"

# --- the bucket layout ---------------------------------------------------------
# Every prefix carries the stack, so that stacks sharing a bucket (two of one repository,
# or two teams' from two repositories) never write the same object:
#   datasets/<stack>/<dataset>/     a dataset, staged by its Job or uploaded by `pulumi up`
#   checkpoints/<stack>/<run>/      a run's checkpoints and its progress record
#   profiles/<stack>/<run>/         its TensorBoard events and profiler traces
#   exports/<stack>/<run>/          its exported model
# A run reads its stack's datasets/<stack>/ and writes only below its own prefixes. Runs
# deployed before prefixes carried the stack used `<top>/<run>/` (and read all of datasets/):
# such a run keeps its prefixes until `make migrate` copies them (`RunPrefixes.legacy`).
DATA_PREFIX = "datasets"
CHECKPOINT_PREFIX = "checkpoints"
PROFILE_PREFIX = "profiles"
# A run's exported model (its `export:`), written when training succeeds, read by `make download` and a
# stack's `serve:`.
EXPORT_PREFIX = "exports"
TOP_PREFIXES = (DATA_PREFIX, CHECKPOINT_PREFIX, PROFILE_PREFIX, EXPORT_PREFIX)


def stack_prefix(top: str, stack: str) -> str:
    """A stack's part of one of the bucket's top prefixes (no trailing '/')."""
    return f"{top}/{stack}"


def dataset_prefix(stack: str, dataset: str) -> str:
    return f"{stack_prefix(DATA_PREFIX, stack)}/{dataset}"


def checkpoint_prefix(stack: str, run: str) -> str:
    return f"{stack_prefix(CHECKPOINT_PREFIX, stack)}/{run}"


def profile_prefix(stack: str, run: str) -> str:
    return f"{stack_prefix(PROFILE_PREFIX, stack)}/{run}"


def export_prefix(stack: str, run: str) -> str:
    """Where a run's exported model goes."""
    return f"{stack_prefix(EXPORT_PREFIX, stack)}/{run}"


def legacy_prefix(top: str, name: str) -> str:
    """`<top>/<run or dataset>`: the layout before prefixes carried the stack."""
    return f"{top}/{name}"


@dataclass(frozen=True)
class RunPrefixes:
    """The prefixes one run mounts (each without a trailing '/'): the data it reads, what it writes."""

    data: str
    checkpoints: str
    profiles: str
    legacy: bool = False  # the layout before prefixes carried the stack, kept for a run deployed under it

    @property
    def writes(self) -> tuple[str, str]:
        return (self.checkpoints, self.profiles)


def run_prefixes(stack: str, run: str, legacy: bool = False) -> RunPrefixes:
    if legacy:
        return RunPrefixes(DATA_PREFIX, legacy_prefix(CHECKPOINT_PREFIX, run), legacy_prefix(PROFILE_PREFIX, run), True)
    return RunPrefixes(stack_prefix(DATA_PREFIX, stack), checkpoint_prefix(stack, run), profile_prefix(stack, run))


@dataclass(frozen=True)
class BucketLayout:
    """Where a stack's objects are: its runs' prefixes (a run deployed before prefixes carried the stack keeps
    its old ones: `legacy_runs`, found in the bucket at preview) and its datasets'."""

    stack: str
    legacy_runs: frozenset[str] = frozenset()

    def run(self, run: str) -> RunPrefixes:
        return run_prefixes(self.stack, run, run in self.legacy_runs)

    def dataset(self, name: str) -> str:
        return dataset_prefix(self.stack, name)

    @property
    def datasets(self) -> str:
        return stack_prefix(DATA_PREFIX, self.stack)

    def folders(self, runs, datasets, exports=()) -> tuple[str, ...]:
        """Every folder (name with its trailing '/') the stack's prefixes lie in, each after its parent: the top
        prefixes, the stack's part of each, each dataset's, each run's checkpoints and profiles, and each of
        `exports` (runs that export). A legacy run's prefixes were written already, and are left out."""
        leaves = [self.dataset(d) for d in datasets]
        leaves += [p for run in runs if run not in self.legacy_runs for p in self.run(run).writes]
        leaves += [export_prefix(self.stack, run) for run in exports]
        folders: list[str] = []
        for leaf in [self.datasets, *leaves]:
            parts = leaf.split("/")
            for depth in range(1, len(parts) + 1):
                folder = "/".join(parts[:depth]) + "/"
                if folder not in folders:
                    folders.append(folder)
        return tuple(folders)

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


# Label values (a ComputeClass or WorkloadPriorityClass name in a run's labels or selector) and the name of a
# ProvisioningRequestConfig (an AdmissionCheck's `spec.parameters.name`, a DNS-1123 label in Kueue v0.19.2's CRD:
# `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, 63 characters) are at most 63 characters.
SCOPED_NAME_MAX = 63
SCOPE_HASH_CHARS = 6


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
    """The name of a cluster-scoped object a stack declares (ResourceFlavor, AdmissionCheck,
    ProvisioningRequestConfig, ComputeClass): `<namespace>-<name>-<hash>`, the hash of the namespace and the
    name apart, so ("ml", "spot-v6e-2x4") and ("ml-spot", "v6e-2x4") are two names and two stacks sharing a
    cluster (each in its own namespace) never declare the same object. A DNS-1123 label, which every kind
    takes (no separator does: namespaces, pools and runs may all hold hyphens, and a dot is refused where
    Kueue names a ProvisioningRequestConfig); a long head is cut, never the hash. The stack's one ClusterQueue
    is named `<namespace>`."""
    if not name:
        return namespace
    return _hashed(f"{namespace}-{name}", f"{namespace}/{name}")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:SCOPE_HASH_CHARS]


def _hashed(head: str, identity: str) -> str:
    """`<head>-<hash of identity>` within SCOPED_NAME_MAX: a long head is cut, never the hash."""
    return f"{head[:SCOPED_NAME_MAX - SCOPE_HASH_CHARS - 1].rstrip('-')}-{_digest(identity)}"


def legacy_cluster_scoped(namespace: str, name: str) -> str:
    """The name `cluster_scoped` gave before it told namespace and name apart (`<namespace>-<name>`): the
    Pulumi aliases of the objects declared under it, so the preview shows them renamed."""
    return bounded(f"{namespace}-{name}", SCOPED_NAME_MAX)


def priority_class_name(namespace: str, priority: str) -> str:
    """The WorkloadPriorityClass of a run's `priority` (cluster-scoped): `<namespace>-<priority>`.

    Unambiguous as it is: a priority is one of WORKLOAD_PRIORITIES, none of which holds a hyphen, so the
    last hyphen ends the namespace. It keeps this form because a run's labels name it: another name
    would replace every running JobSet that has a priority."""
    return bounded(f"{namespace}-{priority}", SCOPED_NAME_MAX)


def compute_class_name(namespace: str, run: str) -> str:
    """The ComputeClass of an Autopilot run's capacity ladder (cluster-scoped; `ladder-` keeps it
    clear of GKE's own classes, such as `autopilot` and `autopilot-spot`)."""
    return cluster_scoped(namespace, f"ladder-{run}")


def legacy_compute_class_name(namespace: str, run: str) -> str:
    """`compute_class_name` before `cluster_scoped` told namespace and name apart."""
    return legacy_cluster_scoped(namespace, f"ladder-{run}")


# The prefix of the objects stacks share rather than own (a shared pool's ResourceFlavor, the cohort of the
# ClusterQueues that share pools): named from what they are, never from one stack, so that every stack that
# declares them declares the same object.
SHARED_PREFIX = "gke-finetune-shared"


def shared_flavor_name(node_labels: dict[str, str], tolerations: tuple[dict, ...] | list[dict]) -> str:
    """The ResourceFlavor of a pool several stacks share (`pools[].quota`): named from its spec (the node labels
    and tolerations Kueue gives an admitted pod), so two stacks that select the same nodes the same way name the
    same flavor, and two flavors of one name always have the same spec. `<prefix>-<a label value>-<hash>`."""
    identity = json.dumps({"nodeLabels": node_labels, "tolerations": list(tolerations)}, sort_keys=True)
    hint = slug(sorted(node_labels.values())[0]) if node_labels else "pool"
    return _hashed(f"{SHARED_PREFIX}-{hint}", identity)


def cohort_name(shared_flavors: list[str] | tuple[str, ...]) -> str:
    """The Kueue cohort of the ClusterQueues that share pools: named from the shared flavors (sorted), so the
    stacks that share the same pools are in one cohort and borrow each other's idle quota of them."""
    return f"{SHARED_PREFIX}-{_digest(','.join(sorted(set(shared_flavors))))}"
