"""gke-finetune: wires the platform components for the selected stack.

The stack file is read and validated first (stack/reader.py); nothing is
declared if it is invalid. Every decision lives in the layers below: this
file only connects the components' inputs and outputs.

Two ways to a cluster: the stack's own (`platform_cluster`: APIs, network,
cluster, node pools, bucket, registry, images), or one that exists already
(`existing_cluster`, stack/existing.py: only a Kubernetes provider, and the
bucket grants when the stack asks for them). Both end in the same in-cluster
parts (`in_cluster`): the runs' workspace, the controllers, the queues, the
staging Jobs and the runs.
"""

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.apis import ProjectApis, ProjectApisArgs
from components.cluster import Cluster, ClusterArgs
from components.compute_classes import ComputeClasses, ComputeClassesArgs
from components.datasets import DatasetStaging, DatasetStagingArgs
from components.firewall import WebhookFirewall, WebhookFirewallArgs
from components.identity import Identity, IdentityArgs, member_of
from components.images import TrainerImages, TrainerImagesArgs
from components.jobset import JobSetController, JobSetControllerArgs
from components.kube import (
    ExistingClusterAccess, KubeconfigAccessArgs, KubernetesAccess, KubernetesAccessArgs, existing_cluster_endpoint,
)
from components.kueue import Kueue, KueueArgs
from components.network import Network, NetworkArgs
from components.node_pools import NodePools, NodePoolsArgs
from components.registry import Registry, RegistryArgs
from components.runs import Runs, RunsArgs
from components.storage import BucketGrants, BucketGrantsArgs, DataBucket, DataBucketArgs
from components.workspace import RunsWorkspace, RunsWorkspaceArgs
from admission.check import admit
from core.ids import kubernetes_service_account_principal
from core.names import RUNS_NAMESPACE, STAGER_KSA, TRAINER_KSA
from stack import reader
from stack.apis import required_apis
from stack.config import StackConfig
from stack.images import trainers_to_build


@dataclass
class Footing:
    """What the in-cluster parts stand on, from either way to a cluster."""

    provider: k8s.Provider
    images: dict  # trainer -> image by digest (an Output while being built)
    contracts: dict  # pool -> SchedulingContract
    stager_member: pulumi.Input[str] | None
    # What the controllers wait for (nodes to run on), what every in-cluster object waits for
    # (the cluster), what pods and grants wait for (the bucket, the grants).
    controller_nodes: list = field(default_factory=list)
    cluster: list = field(default_factory=list)
    bucket: list = field(default_factory=list)
    opts: pulumi.ResourceOptions | None = None  # after the APIs, on the stack's own cluster
    install_controllers: bool = True
    staging_grants: bool = True


def platform_cluster(cfg: StackConfig) -> Footing:
    """The stack's own cluster: every Google Cloud resource it needs, and its trainer images."""
    # Every other resource waits for the APIs it may use.
    apis = ProjectApis("apis", ProjectApisArgs(project=cfg.project, services=required_apis(cfg)))
    after_apis = apis.dependents
    identity = Identity("identity", IdentityArgs(project=cfg.project, stack=cfg.stack,
                                                 project_number=cfg.project_number), after_apis)
    registry = Registry("registry", RegistryArgs(
        project=cfg.project, region=cfg.region, repository_id=cfg.registry_name,
        reader_member=member_of(identity.node_account)), after_apis)
    network = Network("network", NetworkArgs(project=cfg.project, region=cfg.region, stack=cfg.stack,
                                             config=cfg.network), after_apis)
    cluster = Cluster("cluster", ClusterArgs(
        config=cfg, node_service_account=identity.node_account.email, network=network.network,
        subnetwork=network.subnetwork, pods_range_name=network.pods_range_name,
        services_range_name=network.services_range_name), after_apis)
    storage = DataBucket("data", DataBucketArgs(
        project=cfg.project, location=cfg.region, name=cfg.data_bucket, trainer_member=identity.trainer_member,
        grants_depend_on=[cluster.cluster]), after_apis)
    pools = NodePools("accelerators", NodePoolsArgs(
        config=cfg, cluster_id=cluster.cluster.id, node_service_account=identity.node_account.email), after_apis)
    kube = KubernetesAccess("gke", KubernetesAccessArgs(
        cluster_name=cluster.name, endpoint=cluster.endpoint, ca_certificate=cluster.ca_certificate,
        dns_endpoint=cluster.dns_endpoint))
    system_nodes = [cluster.system_pool] if cluster.system_pool else [cluster.cluster]
    # Private nodes: the control plane reaches the controllers' webhooks only through this rule.
    if cfg.network.private_nodes:
        firewall = WebhookFirewall("webhooks", WebhookFirewallArgs(
            config=cfg, network=network.network, control_plane_range=cluster.control_plane_range), after_apis)
        system_nodes = [*system_nodes, firewall.rule]

    pulumi.export("clusterName", cluster.name)
    pulumi.export("clusterLocation", cluster.location)
    pulumi.export("getCredentials", pulumi.Output.concat(
        "gcloud container clusters get-credentials ", cluster.name, " --location ", cluster.location,
        " --project ", cfg.project, " --dns-endpoint" if cluster.dns_endpoint else ""))
    pulumi.export("bucketUrl", storage.url)
    pulumi.export("registryUrl", registry.url)
    pulumi.export("nodeServiceAccount", identity.node_account.email)
    pulumi.export("trainerPrincipal", identity.trainer_member)

    # Trainer images: pinned by digest in the stack file, or built from this
    # repository, pushed to the stack's registry and referenced by digest.
    images = dict(cfg.images.by_trainer())
    to_build = trainers_to_build(cfg)
    if to_build:
        built = TrainerImages("images", TrainerImagesArgs(
            registry_url=registry.url, builder=cfg.image_builder, trainers=to_build, project=cfg.project,
            region=cfg.region), after_apis)
        images.update(built.refs)
        pulumi.export("images", built.refs)
    return Footing(provider=kube.provider, images=images, contracts=pools.contracts,
                   stager_member=identity.stager_member, controller_nodes=system_nodes, cluster=[cluster.cluster],
                   bucket=[storage.bucket], opts=after_apis)


def existing_cluster(cfg: StackConfig) -> Footing:
    """A cluster the platform team runs: its provider, and the bucket grants if the stack declares them."""
    existing = cfg.existing
    if existing.by_context:
        access = ExistingClusterAccess("gke", KubeconfigAccessArgs(context=existing.context,
                                                                   kubeconfig=existing.kubeconfig or None))
        pulumi.export("context", existing.context)
    else:
        access = ExistingClusterAccess("gke", existing_cluster_endpoint(existing.name, existing.location, cfg.project))
        pulumi.export("clusterName", existing.name)
        pulumi.export("clusterLocation", existing.location)
    grants, stager = [], None
    if existing.bucket_grants:
        trainer = kubernetes_service_account_principal(cfg.project_number, cfg.project, RUNS_NAMESPACE, TRAINER_KSA)
        stager = kubernetes_service_account_principal(cfg.project_number, cfg.project, RUNS_NAMESPACE, STAGER_KSA)
        grants = [BucketGrants("data", BucketGrantsArgs(bucket=cfg.data_bucket, trainer_member=trainer))]
        pulumi.export("trainerPrincipal", trainer)
    pulumi.export("bucketUrl", f"gs://{cfg.data_bucket}")
    return Footing(provider=access.provider, images=dict(cfg.images.by_trainer()), contracts=cfg.contracts(),
                   stager_member=stager, bucket=grants, install_controllers=existing.controllers == "install",
                   staging_grants=existing.bucket_grants)


def in_cluster(cfg: StackConfig, at: Footing) -> None:
    """The runs' workspace, the controllers, the queues, the staging Jobs and the runs."""
    workspace = RunsWorkspace("runs-workspace", RunsWorkspaceArgs(
        provider=at.provider, hf_token=reader.hf_token(cfg), depends_on=at.cluster), at.opts)
    controllers = []
    if at.install_controllers:
        jobset = JobSetController("jobset", JobSetControllerArgs(
            provider=at.provider, depends_on=at.controller_nodes, charts=cfg.charts))
        controllers = [jobset.release]

    # Kueue, only for a stack whose runs need it (a queued pool, a ladder, a priority).
    queue_ready = []
    if cfg.kueue_flavors():
        kueue = Kueue("kueue", KueueArgs(
            flavors=cfg.kueue_flavors(), provider=at.provider, depends_on=controllers,
            namespace_dependencies=[workspace.namespace], charts=cfg.charts, install=at.install_controllers))
        queue_ready = kueue.ready

    # Autopilot: one ComputeClass per capacity ladder, which the ladder's run selects.
    if cfg.compute_classes():
        compute_classes = ComputeClasses("compute-classes", ComputeClassesArgs(
            classes=cfg.compute_classes(), provider=at.provider, depends_on=at.cluster))
        queue_ready = [*queue_ready, *compute_classes.ready]

    pulumi.export("pools", {
        name: {"nodePools": list(c.node_pool_names), "nodeSelector": c.node_selector, "chips": c.total_chips}
        for name, c in at.contracts.items()})

    # Datasets: staged into the bucket by awaited in-cluster Jobs, before the runs that read them.
    staging = DatasetStaging("datasets", DatasetStagingArgs(
        config=cfg, provider=at.provider, images=at.images, stager_member=at.stager_member,
        depends_on=[*at.cluster, *at.bucket, *workspace.pod_dependencies], grants=at.staging_grants), at.opts)

    runs = Runs("runs", RunsArgs(
        runs=cfg.runs, contracts=at.contracts, bucket=cfg.data_bucket, images=at.images, provider=at.provider,
        data_paths=cfg.data_paths(),
        depends_on=[*controllers, *at.bucket, *workspace.pod_dependencies, *staging.jobs.values(), *queue_ready]))
    pulumi.export("runs", sorted(runs.jobsets))
    pulumi.export("datasets", {name: f"gs://{cfg.data_bucket}/datasets/{name}/" for name in staging.jobs})


# The stack file, validated; then every run against what GKE admits and schedules.
cfg = admit(reader.load())
in_cluster(cfg, existing_cluster(cfg) if cfg.existing else platform_cluster(cfg))
