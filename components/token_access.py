"""Who may read the Hugging Face token's secret: the Kubernetes service accounts of the pods that mount it.

GKE's Secret Manager add-on reads the secret with the pod's own Kubernetes service account through
Workload Identity Federation for GKE, so each such principal is granted roles/secretmanager.secretAccessor
on that one secret (https://cloud.google.com/secret-manager/docs/secret-manager-managed-csi-component),
and nothing else of Secret Manager. The grant names the principal of this stack's namespace and account
(components/identity.py), so another stack's grant on a shared secret is its own binding.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

ACCESSOR = "roles/secretmanager.secretAccessor"


@dataclass
class TokenAccessArgs:
    secret: str  # projects/<p>/secrets/<s> (StackConfig.hf_token_secret_name)
    readers: dict[str, pulumi.Input[str]] = field(default_factory=dict)  # name -> IAM principal


class TokenAccess(pulumi.ComponentResource):
    """One secretAccessor grant on the token's secret per reader (the trainer's, the stager's)."""

    grants: list[gcp.secretmanager.SecretIamMember]

    def __init__(self, name: str, args: TokenAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-finetune:platform:TokenAccess", name, None, opts)
        project, _, secret = args.secret.removeprefix("projects/").partition("/secrets/")
        self.grants = [
            gcp.secretmanager.SecretIamMember(
                f"{name}-{reader}", project=project, secret_id=secret, role=ACCESSOR, member=member,
                opts=pulumi.ResourceOptions(parent=self))
            for reader, member in sorted(args.readers.items())
        ]
        self.register_outputs({"secret": args.secret})
