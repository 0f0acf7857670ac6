"""Where runs live in the cluster: their namespace, identity and, when a run needs it, the Hugging Face token's
SecretProviderClass (manifests/token.py: the token stays in Secret Manager, never in Pulumi)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from admission.pod_security import ENFORCE_LABEL
from core.names import STACK_LABEL, stack_label_value
from manifests.token import secret_provider_class


@dataclass
class RunsWorkspaceArgs:
    provider: k8s.Provider
    namespace: str  # the stack's (StackConfig.runs_namespace)
    stack: str  # the stack's name, which a namespace the stack declares carries
    service_account: str  # the trainer's Kubernetes service account
    # False: the namespace exists (an existing cluster's, the platform team's) and is not declared, so
    # `destroy` leaves it and whatever else it holds.
    create_namespace: bool
    # The token's Secret Manager version (`projects/<p>/secrets/<s>/versions/<v>`), or None when no run
    # or staging Job of the stack reads the Hub (nothing of the token then).
    hf_token_version: str | None
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    # The Pod Security level a namespace the stack declares enforces: the least strict its pods need
    # (admission/namespace_needs.py), so that nothing laxer runs there.
    pod_security: str | None = None


class RunsWorkspace(pulumi.ComponentResource):
    """Namespace (unless it exists), the trainer KSA (an IAM principal of its own, components/identity.py), the
    token's SecretProviderClass if needed."""

    namespace: k8s.core.v1.Namespace | None
    service_account: k8s.core.v1.ServiceAccount
    hf_token: k8s.apiextensions.CustomResource | None
    # What the runs' pods need to exist first: the namespace, the KSA and the SecretProviderClass if any.
    pod_dependencies: list[pulumi.Resource]

    def __init__(self, name: str, args: RunsWorkspaceArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-finetune:platform:RunsWorkspace", name, None, opts)
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.depends_on)
        labels = {STACK_LABEL: stack_label_value(args.stack)}
        if args.pod_security:
            labels[ENFORCE_LABEL] = args.pod_security
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-ns", metadata={"name": args.namespace, "labels": labels}, opts=k8s_opts
        ) if args.create_namespace else None
        in_ns = pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=self.namespaced))
        self.service_account = k8s.core.v1.ServiceAccount(
            f"{name}-ksa",
            # No iam.gke.io/gcp-service-account annotation: IAM grants go to this
            # service account's own principal, not to a Google service account.
            metadata={"name": args.service_account, "namespace": args.namespace},
            opts=in_ns,
        )
        self.hf_token = None
        if args.hf_token_version is not None:
            spc = secret_provider_class(args.namespace, args.hf_token_version)
            self.hf_token = k8s.apiextensions.CustomResource(
                f"{name}-hf-token", api_version=spc["apiVersion"], kind=spc["kind"], metadata=spc["metadata"],
                spec=spc["spec"], opts=in_ns)
        self.pod_dependencies = [*self.namespaced, self.service_account]
        self.pod_dependencies += [self.hf_token] if self.hf_token is not None else []
        self.register_outputs({"namespace": args.namespace, "service_account": args.service_account})

    @property
    def namespaced(self) -> list[pulumi.Resource]:
        """What an object in the namespace waits for: the namespace where the stack declares it."""
        return [self.namespace] if self.namespace is not None else []
