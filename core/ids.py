"""Cloud resource ids derived from the stack name, within GCP's limits. Pure functions."""

from __future__ import annotations

import hashlib
import re

# https://cloud.google.com/iam/docs/service-accounts-create#creating:
# 6-30 characters, lowercase letters, digits and hyphens, starting with a letter.
SERVICE_ACCOUNT_ID_MAX = 30
_SERVICE_ACCOUNT_ID = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")


def slug(text: str) -> str:
    """Lowercase letters, digits and single hyphens (Pulumi stack names also allow `_` and `.`)."""
    cleaned = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return cleaned or "stack"


def bounded(name: str, limit: int, key: str | None = None) -> str:
    """`name` if it fits in `limit` characters, else its head and a hash of `key` (default: `name`)
    that keeps it unique; always ends with a letter or digit."""
    if len(name) <= limit:
        return name
    digest = hashlib.sha256((key or name).encode()).hexdigest()[:6]
    return f"{name[:limit - len(digest) - 1].rstrip('-')}-{digest}"


# The lengths the stack's own `clusterName` and `registryName` keys allow (stack/config.py): GKE's
# console refuses a cluster name over 40 characters; a repository id is a DNS label.
CLUSTER_NAME_MAX = 40
REPOSITORY_ID_MAX = 63


def default_cluster_name(stack: str) -> str:
    """`finetune-<stack>`: two stacks of one project and location never ask GKE for the same cluster."""
    return bounded(f"finetune-{slug(stack)}", CLUSTER_NAME_MAX, stack)


def default_registry_id(stack: str) -> str:
    """`finetune-<stack>`: two stacks of one project and region never ask for the same repository."""
    return bounded(f"finetune-{slug(stack)}", REPOSITORY_ID_MAX, stack)


def service_account_id(stack: str, role: str) -> str:
    """`ft-<stack>-<role>`, the stack part shortened with a hash suffix when it would not fit."""
    base = f"ft-{slug(stack)}-{role}"
    if len(base) <= SERVICE_ACCOUNT_ID_MAX:
        result = base
    else:
        digest = hashlib.sha256(stack.encode()).hexdigest()[:6]
        room = SERVICE_ACCOUNT_ID_MAX - len(f"ft--{digest}-{role}")
        result = f"ft-{slug(stack)[:room].rstrip('-')}-{digest}-{role}"
    assert _SERVICE_ACCOUNT_ID.fullmatch(result), result
    return result


def workload_identity_pool(project: str) -> str:
    """The cluster's Workload Identity pool: one per project, created with its first such cluster."""
    return f"{project}.svc.id.goog"


def kubernetes_service_account_principal(project_number: str, project: str, namespace: str, name: str) -> str:
    """The IAM principal of a Kubernetes service account under Workload Identity Federation for GKE.

    IAM roles granted to it reach the pods that run as that service account,
    with no Google service account in between (GKE's primary Workload
    Identity model), and the GCS FUSE sidecar of a host-network pod, which
    authenticates as the service account itself (`hostNetworkPodKSA`).
    https://cloud.google.com/kubernetes-engine/docs/concepts/workload-identity#kubernetes-resources-iam-policies
    """
    return (
        f"principal://iam.googleapis.com/projects/{project_number}/locations/global/"
        f"workloadIdentityPools/{workload_identity_pool(project)}/subject/ns/{namespace}/sa/{name}"
    )


def network_name(stack: str) -> str:
    """The stack's own VPC network (at most 56 characters: its subnetwork adds `-nodes`)."""
    return f"finetune-{slug(stack)}"[:56]


def subnetwork_name(stack: str) -> str:
    return f"{network_name(stack)}-nodes"


def webhook_firewall_name(stack: str) -> str:
    """The rule that lets the control plane reach the controllers' webhooks on the stack's nodes."""
    return f"finetune-{slug(stack)}-webhooks"[:63]


def default_bucket_name(project: str, stack: str) -> str:
    return f"{project}-{slug(stack)}-finetune"


def registry_url(region: str, project: str, repository_id: str) -> str:
    """The Docker repository's address in Artifact Registry: `<region>-docker.pkg.dev/<project>/<id>`."""
    return f"{region}-docker.pkg.dev/{project}/{repository_id}"


# https://cloud.google.com/vpc/docs/add-remove-network-tags: lowercase letters,
# digits and hyphens, at most 63 characters, starting with a letter.
NETWORK_TAG_MAX = 63


def node_network_tag(stack: str) -> str:
    """The network tag on every node of a stack, `finetune-<stack>-nodes`, shortened with a hash."""
    base = f"finetune-{slug(stack)}-nodes"
    if len(base) <= NETWORK_TAG_MAX:
        return base
    digest = hashlib.sha256(stack.encode()).hexdigest()[:6]
    room = NETWORK_TAG_MAX - len(f"finetune--{digest}-nodes")
    return f"finetune-{slug(stack)[:room].rstrip('-')}-{digest}-nodes"
