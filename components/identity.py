"""Identities: the nodes' Google service account, and the trainers' Kubernetes one as an IAM principal.

The node account gets only what a GKE node needs
(https://cloud.google.com/kubernetes-engine/docs/how-to/hardening-your-cluster#use_least_privilege_sa);
image pull is granted on the registry itself (components/registry.py). The
trainer pods run as the stack's trainer Kubernetes service account
(`<stack>-trainer` in the stack's namespace, core/names.py), which IAM knows
directly as a Workload Identity Federation principal (core/ids.py): its data access is granted on the bucket itself
(components/storage.py), to that principal, so the pods' GCS FUSE sidecars
(host-network ones included, which authenticate as the service account
itself) and the trainers hold exactly the same rights. No Google service
account stands in for the trainer, and no key is ever created.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from core.ids import kubernetes_service_account_principal, service_account_id

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
    namespace: str  # the runs' namespace
    trainer_account: str  # the Kubernetes service accounts whose principals the grants name
    stager_account: str
    server_account: str = ""  # the model server's (`serve:`); empty: none
    project_number: str = ""  # empty: read from the Resource Manager API


def project_number(args: IdentityArgs, parent: pulumi.Resource) -> pulumi.Output[str]:
    """The number IAM principals name the project by: the stack's, or the API's."""
    if args.project_number:
        return pulumi.Output.from_input(args.project_number)
    project = gcp.organizations.get_project_output(project_id=args.project, opts=pulumi.InvokeOutputOptions(parent=parent))
    return project.number


class Identity(pulumi.ComponentResource):
    """The node Google service account and its project roles; the trainer's IAM principal."""

    node_account: gcp.serviceaccount.Account
    trainer_member: pulumi.Output[str]  # the trainer KSA's principal, for IAM bindings
    stager_member: pulumi.Output[str]  # the dataset staging KSA's principal
    server_member: pulumi.Output[str] | None  # the model server KSA's principal (`serve:`), else None

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
        # The principal names the project by number: the stack's projectNumber, else the API's.
        number = project_number(args, self)
        self.trainer_member = number.apply(
            lambda number: kubernetes_service_account_principal(number, args.project, args.namespace,
                                                                args.trainer_account)
        )
        self.stager_member = number.apply(
            lambda number: kubernetes_service_account_principal(number, args.project, args.namespace,
                                                                args.stager_account)
        )
        self.server_member = number.apply(
            lambda number: kubernetes_service_account_principal(number, args.project, args.namespace,
                                                                args.server_account)
        ) if args.server_account else None
        self.register_outputs({"node_email": self.node_account.email, "trainer_member": self.trainer_member})
