"""The Hugging Face token as a file, mounted from Secret Manager by GKE's Secret Manager add-on.

The token never passes through Pulumi: it lives in a Secret Manager secret, and the add-on's CSI driver
(`secrets-store-gke.csi.k8s.io`) writes its version into the pod's volume as an in-memory file when the
pod starts, read with the pod's own Kubernetes service account (Workload Identity Federation for GKE:
the principal needs roles/secretmanager.secretAccessor on the secret). A SecretProviderClass in the
pod's namespace says which version and under which file name (`provider: gke`, `parameters.secrets`: a
YAML list of `resourceName: projects/<p>/secrets/<s>/versions/<v>` and `path`). Source:
https://cloud.google.com/secret-manager/docs/secret-manager-managed-csi-component; the SecretProviderClass
type is kubernetes-sigs/secrets-store-csi-driver apis/v1/secretproviderclass_types.go (spec.provider,
spec.parameters: map of strings). No Kubernetes Secret is made (no `secretObjects`), so no Secret read
reaches the token either.

Only the pods that read the Hub get the volume: a run whose trainer row says so (or one's own container
asking with `hfToken: true`), a staging Job of a gated dataset. The others get nothing.
"""

from __future__ import annotations

import yaml

from core.names import HF_TOKEN_KEY, HF_TOKEN_PROVIDER_CLASS

SECRETS_STORE_API = "secrets-store.csi.x-k8s.io/v1"
GKE_SECRETS_DRIVER = "secrets-store-gke.csi.k8s.io"
# Where the token file is mounted in a container that reads it (HF_TOKEN_PATH names the file).
HF_TOKEN_DIR = "/var/run/secrets/huggingface"
HF_TOKEN_FILE = f"{HF_TOKEN_DIR}/{HF_TOKEN_KEY}"
VOLUME = "hf-token"


def secret_provider_class(namespace: str, version: str, labels: dict[str, str] | None = None) -> dict:
    """The SecretProviderClass that mounts `version` (`projects/<p>/secrets/<s>/versions/<v>`) as `token`."""
    secrets = yaml.safe_dump([{"resourceName": version, "path": HF_TOKEN_KEY}], sort_keys=False)
    metadata = {"name": HF_TOKEN_PROVIDER_CLASS, "namespace": namespace, **({"labels": labels} if labels else {})}
    return {"apiVersion": SECRETS_STORE_API, "kind": "SecretProviderClass", "metadata": metadata,
            "spec": {"provider": "gke", "parameters": {"secrets": secrets}}}


def token_volume() -> dict:
    """The pod volume: the add-on's CSI driver, read only, through the namespace's SecretProviderClass."""
    return {"name": VOLUME, "csi": {"driver": GKE_SECRETS_DRIVER, "readOnly": True,
                                    "volumeAttributes": {"secretProviderClass": HF_TOKEN_PROVIDER_CLASS}}}


def token_mount() -> dict:
    return {"name": VOLUME, "mountPath": HF_TOKEN_DIR, "readOnly": True}
