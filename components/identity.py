"""Google service accounts: one for nodes, one for trainers. No keys are ever created.

The node account gets only what a GKE node needs
(https://cloud.google.com/kubernetes-engine/docs/how-to/hardening-your-cluster#use_least_privilege_sa);
image pull is granted on the registry itself (components/registry.py), data access
on the bucket itself (components/storage.py), and the trainer account's Workload
Identity binding sits with the Kubernetes service account (components/workspace.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from core.ids import service_account_id

NODE_ROLES = (
    "roles/logging.logWriter",
    "roles/monitoring.metricWriter",
    "roles/monitoring.viewer",
    "roles/stackdriver.resourceMetadata.writer",
    "roles/autoscaling.metricsWriter",
)


def member_of(account: gcp.serviceaccount.Account) -> pulumi.Output[str]:
    """The IAM member string of a service account."""
    return account.email.apply(lambda email: f"serviceAccount:{email}")


@dataclass
class IdentityArgs:
    project: str
    stack: str


class Identity(pulumi.ComponentResource):
    """The node and trainer Google service accounts and the node account's project roles."""

    node_account: gcp.serviceaccount.Account
    trainer_account: gcp.serviceaccount.Account

    def __init__(self, name: str, args: IdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-finetune:platform:Identity", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.node_account = gcp.serviceaccount.Account(
            f"{name}-nodes",
            project=args.project,
            account_id=service_account_id(args.stack, "nodes"),
            display_name=f"GKE nodes ({args.stack})",
            opts=child,
        )
        for role in NODE_ROLES:
            gcp.projects.IAMMember(
                f"{name}-nodes-{role.split('/')[1]}",
                project=args.project,
                role=role,
                member=member_of(self.node_account),
                opts=child,
            )
        self.trainer_account = gcp.serviceaccount.Account(
            f"{name}-trainer",
            project=args.project,
            account_id=service_account_id(args.stack, "trainer"),
            display_name=f"Fine-tuning trainer ({args.stack})",
            opts=child,
        )
        self.register_outputs(
            {"node_email": self.node_account.email, "trainer_email": self.trainer_account.email}
        )
