"""Where runs live in the cluster: their namespace, identity and, when a run needs it, the Hugging Face token."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from core.names import HF_TOKEN_KEY, HF_TOKEN_SECRET, RUNS_NAMESPACE, TRAINER_KSA


@dataclass
class RunsWorkspaceArgs:
    provider: k8s.Provider
    # A secret Output, or None when no run of the stack reads the Hub (no Secret then).
    hf_token: pulumi.Input[str] | None
    # The token is a preview's stand-in (stack/reader.py hf_token_planned_only): the Secret's value
    # is then left out of the diff, so that a preview without the token shows no change to it.
    hf_token_planned_only: bool = False
    depends_on: list[pulumi.Resource] = field(default_factory=list)


class RunsWorkspace(pulumi.ComponentResource):
    """Namespace, the trainer KSA (an IAM principal of its own, components/identity.py), the HF Secret if needed."""

    namespace: k8s.core.v1.Namespace
    service_account: k8s.core.v1.ServiceAccount
    hf_secret: k8s.core.v1.Secret | None
    # What the runs' pods need to exist first: the namespace, the KSA and the Secret if any.
    pod_dependencies: list[pulumi.Resource]

    def __init__(self, name: str, args: RunsWorkspaceArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-finetune:platform:RunsWorkspace", name, None, opts)
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.depends_on)
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-ns", metadata={"name": RUNS_NAMESPACE}, opts=k8s_opts
        )
        in_ns = pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[self.namespace]))
        self.service_account = k8s.core.v1.ServiceAccount(
            f"{name}-ksa",
            # No iam.gke.io/gcp-service-account annotation: IAM grants go to this
            # service account's own principal, not to a Google service account.
            metadata={"name": TRAINER_KSA, "namespace": RUNS_NAMESPACE},
            opts=in_ns,
        )
        self.hf_secret = None
        if args.hf_token is not None:
            self.hf_secret = k8s.core.v1.Secret(
                f"{name}-hf-token",
                metadata={"name": HF_TOKEN_SECRET, "namespace": RUNS_NAMESPACE},
                type="Opaque",
                string_data={HF_TOKEN_KEY: args.hf_token},
                opts=pulumi.ResourceOptions.merge(in_ns, pulumi.ResourceOptions(
                    ignore_changes=["stringData"] if args.hf_token_planned_only else None)),
            )
        self.pod_dependencies = [self.namespace, self.service_account]
        self.pod_dependencies += [self.hf_secret] if self.hf_secret is not None else []
        self.register_outputs({"namespace": RUNS_NAMESPACE, "service_account": TRAINER_KSA})
