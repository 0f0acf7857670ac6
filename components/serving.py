"""The stack's model server (`serve:`): its identity, its read grant on the export, and its Kubernetes objects.

The objects are manifests/serving.py's dicts, the ones the plan and the goldens show. The server's Kubernetes
service account (`<stack>-server`) is an IAM principal of its own (Workload Identity Federation for GKE, as
the trainer's: components/identity.py) whose one grant reads the served run's export
(components/storage.py `export_read_condition`); on an existing cluster whose bucket grants are the platform
team's, the grant is theirs to make.

`pulumi up` declares the server and returns: the Deployment and the Service are not awaited (their
`pulumi.com/skipAwait`, manifests/serving.py), since the server waits for its run's export, which may be hours
away. The server
comes after the runs (so a first `up` binds the run's pods first) and after its grant (so its mount can read).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from admission.serving import serve_manifests
from components.storage import export_read_condition
from core.names import export_prefix
from stack.config import StackConfig

SERVER_TYPE = "gke-finetune:workloads:ModelServer"


@dataclass
class ModelServerArgs:
    config: StackConfig  # a stack with `serve:`
    provider: k8s.Provider
    # The server account's IAM principal, for its read grant; None: the grant is the platform team's.
    server_member: pulumi.Input[str] | None
    # The namespace, the cluster and the bucket (before the grant and the pods); the runs (before the pods).
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    runs: list[pulumi.Resource] = field(default_factory=list)


class ModelServer(pulumi.ComponentResource):
    """The server account, its grant, the servers' PriorityClass, the vLLM Deployment and its Service."""

    deployment: k8s.apps.v1.Deployment
    service: k8s.core.v1.Service
    service_name: str  # the Service `make chat` port-forwards to

    def __init__(self, name: str, args: ModelServerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(SERVER_TYPE, name, None, opts)
        cfg = args.config
        manifests = {m["kind"]: m for m in serve_manifests(cfg).values()}
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.depends_on)
        account = k8s.core.v1.ServiceAccount(
            f"{name}-ksa", metadata={"name": cfg.server_account, "namespace": cfg.runs_namespace}, opts=k8s_opts)
        ready: list[pulumi.Resource] = [account, *args.runs]
        if args.server_member is not None:
            ready.append(self._grant(name, cfg, args))
        priority = manifests["PriorityClass"]
        ready.append(k8s.scheduling.v1.PriorityClass(
            f"{name}-priority", metadata=priority["metadata"], value=priority["value"],
            preemption_policy=priority["preemptionPolicy"], global_default=priority["globalDefault"],
            description=priority["description"], opts=k8s_opts))
        after = pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=ready))
        deployment, service = manifests["Deployment"], manifests["Service"]
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment", metadata=deployment["metadata"], spec=deployment["spec"], opts=after)
        self.service = k8s.core.v1.Service(
            f"{name}-service", metadata=service["metadata"], spec=service["spec"], opts=after)
        self.service_name = service["metadata"]["name"]
        self.register_outputs({"service": f"{cfg.runs_namespace}/{self.service_name}",
                               "model": cfg.serve.run})

    def _grant(self, name: str, cfg: StackConfig, args: ModelServerArgs) -> gcp.storage.BucketIAMMember:
        prefix = export_prefix(cfg.stack, cfg.serve.run)
        return gcp.storage.BucketIAMMember(
            f"{name}-read", bucket=cfg.data_bucket, role="roles/storage.objectViewer", member=args.server_member,
            condition=gcp.storage.BucketIAMMemberConditionArgs(
                title=f"serve-{cfg.serve.run}-export", description=f"Read only {prefix}/ (and list the bucket)",
                expression=export_read_condition(cfg.data_bucket, prefix)),
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on))

