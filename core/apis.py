"""The Google Cloud APIs a stack uses, enabled by the stack itself (components/apis.py).

https://cloud.google.com/kubernetes-engine/docs/how-to/enable-apis ·
https://cloud.google.com/iam/docs/workload-identity-federation (IAM Credentials) ·
https://cloud.google.com/build/docs/api/reference/rest ·
https://cloud.google.com/secret-manager/docs/secret-manager-managed-csi-component (the Secret Manager add-on)
"""

from __future__ import annotations

# What every stack uses: GKE and the VMs, disks and networks under it; the
# registry of its trainer images; its service accounts and their tokens
# (Workload Identity); the project IAM bindings; the data bucket.
PLATFORM_APIS: tuple[str, ...] = (
    "container.googleapis.com",
    "compute.googleapis.com",
    "artifactregistry.googleapis.com",
    "iam.googleapis.com",
    "iamcredentials.googleapis.com",
    "cloudresourcemanager.googleapis.com",
    "storage.googleapis.com",
)
# Only when `pulumi up` builds a trainer image with `gcloud builds submit`.
CLOUD_BUILD_API = "cloudbuild.googleapis.com"
# Only when a run or a staging Job reads the Hugging Face Hub: the token's secret, mounted by GKE's
# Secret Manager add-on.
SECRET_MANAGER_API = "secretmanager.googleapis.com"
