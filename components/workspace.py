"""Where runs live in the cluster: their namespace, identity and, when a run needs it, the Hugging Face token."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.cluster import workload_pool
from core.names import HF_TOKEN_KEY, HF_TOKEN_SECRET, RUNS_NAMESPACE, TRAINER_KSA


def workload_identity_member(project: str) -> str:
    """The principal of the trainer KSA in the cluster's Workload Identity pool.
    https://cloud.google.com/kubernetes-engine/docs/how-to/workload-identity#kubernetes-sa-to-iam"""
    return f"serviceAccount:{workload_pool(project)}[{RUNS_NAMESPACE}/{TRAINER_KSA}]"


@dataclass
class RunsWorkspaceArgs:
    project: str
    provider: k8s.Provider
    trainer_account: gcp.serviceaccount.Account
    # A secret Output, or None when no run of the stack reads the Hub (no Secret then).
    hf_token: pulumi.Input[str] | None
    # The Workload Identity pool exists once the cluster does.
    depends_on: list[pulumi.Resource] = field(default_factory=list)


class RunsWorkspace(pulumi.ComponentResource):
    """Namespace, the trainer KSA bound by Workload Identity to the trainer GSA, the HF Secret if needed."""

    namespace: k8s.core.v1.Namespace
    service_account: k8s.core.v1.ServiceAccount
    hf_secret: k8s.core.v1.Secret | None
    # What the runs' pods need to exist first: the namespace, the KSA and the Secret if any.
    pod_dependencies: list[pulumi.Resource]

    def __init__(self, name: str, args: RunsWorkspaceArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-finetune:platform:RunsWorkspace", name, None, opts)
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider)
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-ns", metadata={"name": RUNS_NAMESPACE}, opts=k8s_opts
        )
        in_ns = pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[self.namespace]))
        self.service_account = k8s.core.v1.ServiceAccount(
            f"{name}-ksa",
            metadata={
                "name": TRAINER_KSA,
                "namespace": RUNS_NAMESPACE,
                "annotations": {"iam.gke.io/gcp-service-account": args.trainer_account.email},
            },
            opts=in_ns,
        )
        gcp.serviceaccount.IAMMember(
            f"{name}-workload-identity",
            service_account_id=args.trainer_account.name,
            role="roles/iam.workloadIdentityUser",
            member=workload_identity_member(args.project),
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on),
        )
        self.hf_secret = None
        if args.hf_token is not None:
            self.hf_secret = k8s.core.v1.Secret(
                f"{name}-hf-token",
                metadata={"name": HF_TOKEN_SECRET, "namespace": RUNS_NAMESPACE},
                type="Opaque",
                string_data={HF_TOKEN_KEY: args.hf_token},
                opts=in_ns,
            )
        self.pod_dependencies = [self.namespace, self.service_account]
        self.pod_dependencies += [self.hf_secret] if self.hf_secret is not None else []
        self.register_outputs({"namespace": RUNS_NAMESPACE, "service_account": TRAINER_KSA})
