"""GKE's Secret Manager add-on as far as this control plane needs it: its SecretProviderClass kind.

A cluster with the add-on serves `secretproviderclasses.secrets-store.csi.x-k8s.io` (v1), which the stacks
whose pods read the Hugging Face token declare (manifests/token.py). The published CRD is not reachable
from here (its Go module is not on the module proxy this machine reaches), so the harness serves the kind
with an open schema: the API server checks the object's metadata and kind, not its spec; the spec is
checked offline (tests/support/schemas.py secret_provider_class_problems). Nothing mounts the secret here:
kwok's nodes start no volume, and a trainer run in its image gets the file from the harness
(container_run.volume_dirs). Source of the kind, group, version and scope:
kubernetes-sigs/secrets-store-csi-driver apis/v1/secretproviderclass_types.go.
"""

from __future__ import annotations

GROUP, KIND, PLURAL = "secrets-store.csi.x-k8s.io", "SecretProviderClass", "secretproviderclasses"


def secret_provider_class_crd() -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP, "scope": "Namespaced",
            "names": {"kind": KIND, "listKind": f"{KIND}List", "plural": PLURAL, "singular": KIND.lower()},
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}],
        },
    }
