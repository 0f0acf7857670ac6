"""gke-finetune: wires the platform components for the selected stack.

The stack file is read and validated first (stack/reader.py); nothing is
declared if it is invalid. Every decision lives in the layers below: this
file only connects the components' inputs and outputs.
"""

import pulumi

from components.apis import ProjectApis, ProjectApisArgs
from components.cluster import Cluster, ClusterArgs
from components.compute_classes import ComputeClasses, ComputeClassesArgs
from components.datasets import DatasetStaging, DatasetStagingArgs
from components.firewall import WebhookFirewall, WebhookFirewallArgs
from components.identity import Identity, IdentityArgs, member_of
from components.images import TrainerImages, TrainerImagesArgs
from components.jobset import JobSetController, JobSetControllerArgs
from components.kube import KubernetesAccess, KubernetesAccessArgs
from components.kueue import Kueue, KueueArgs
from components.network import Network, NetworkArgs
from components.node_pools import NodePools, NodePoolsArgs
from components.registry import Registry, RegistryArgs
from components.runs import Runs, RunsArgs
from components.storage import DataBucket, DataBucketArgs
from components.workspace import RunsWorkspace, RunsWorkspaceArgs
from admission.check import admit
from stack import reader
from stack.apis import required_apis
from stack.images import trainers_to_build

# The stack file, validated; then every run against what GKE admits and schedules.
cfg = admit(reader.load())

# Every other resource waits for the APIs it may use.
apis = ProjectApis("apis", ProjectApisArgs(project=cfg.project, services=required_apis(cfg)))
after_apis = apis.dependents

identity = Identity("identity", IdentityArgs(project=cfg.project, stack=cfg.stack, project_number=cfg.project_number),
                    after_apis)
registry = Registry(
    "registry",
    RegistryArgs(
        project=cfg.project,
        region=cfg.region,
        repository_id=cfg.registry_name,
        reader_member=member_of(identity.node_account),
    ),
    after_apis,
)
network = Network("network", NetworkArgs(project=cfg.project, region=cfg.region, stack=cfg.stack, config=cfg.network),
                  after_apis)
cluster = Cluster(
    "cluster",
    ClusterArgs(
        config=cfg,
        node_service_account=identity.node_account.email,
        network=network.network,
        subnetwork=network.subnetwork,
        pods_range_name=network.pods_range_name,
        services_range_name=network.services_range_name,
    ),
    after_apis,
)
storage = DataBucket(
    "data",
    DataBucketArgs(
        project=cfg.project,
        location=cfg.region,
        name=cfg.data_bucket,
        trainer_member=identity.trainer_member,
        grants_depend_on=[cluster.cluster],
    ),
    after_apis,
)
pools = NodePools(
    "accelerators",
    NodePoolsArgs(config=cfg, cluster_id=cluster.cluster.id, node_service_account=identity.node_account.email),
    after_apis,
)
kube = KubernetesAccess(
    "gke",
    KubernetesAccessArgs(
        cluster_name=cluster.name, endpoint=cluster.endpoint, ca_certificate=cluster.ca_certificate,
        dns_endpoint=cluster.dns_endpoint,
    ),
)
system_nodes = [cluster.system_pool] if cluster.system_pool else [cluster.cluster]
# Private nodes: the control plane reaches the controllers' webhooks only through this rule.
if cfg.network.private_nodes:
    firewall = WebhookFirewall(
        "webhooks",
        WebhookFirewallArgs(config=cfg, network=network.network, control_plane_range=cluster.control_plane_range),
        after_apis,
    )
    system_nodes = [*system_nodes, firewall.rule]
jobset = JobSetController("jobset", JobSetControllerArgs(provider=kube.provider, depends_on=system_nodes))
workspace = RunsWorkspace(
    "runs-workspace",
    RunsWorkspaceArgs(
        provider=kube.provider,
        hf_token=reader.hf_token(cfg),
        depends_on=[cluster.cluster],
    ),
    after_apis,
)

# Kueue, only for a stack whose runs need it (a queued pool, a ladder, a priority).
queue_ready = []
if cfg.kueue_flavors():
    kueue = Kueue(
        "kueue",
        KueueArgs(
            flavors=cfg.kueue_flavors(),
            provider=kube.provider,
            depends_on=[jobset.release],
            namespace_dependencies=[workspace.namespace],
        ),
    )
    queue_ready = kueue.ready

# Autopilot: one ComputeClass per capacity ladder, which the ladder's run selects.
if cfg.compute_classes():
    compute_classes = ComputeClasses(
        "compute-classes",
        ComputeClassesArgs(classes=cfg.compute_classes(), provider=kube.provider, depends_on=[cluster.cluster]),
    )
    queue_ready = [*queue_ready, *compute_classes.ready]

pulumi.export("clusterName", cluster.name)
pulumi.export("clusterLocation", cluster.location)
pulumi.export(
    "getCredentials",
    pulumi.Output.concat(
        "gcloud container clusters get-credentials ", cluster.name,
        " --location ", cluster.location, " --project ", cfg.project,
        " --dns-endpoint" if cluster.dns_endpoint else "",
    ),
)
pulumi.export("bucketUrl", storage.url)
pulumi.export("registryUrl", registry.url)
pulumi.export("nodeServiceAccount", identity.node_account.email)
pulumi.export("trainerPrincipal", identity.trainer_member)
pulumi.export(
    "pools",
    {name: {"nodePools": list(c.node_pool_names), "nodeSelector": c.node_selector, "chips": c.total_chips}
     for name, c in pools.contracts.items()},
)

# Trainer images: pinned by digest in the stack file, or built from this
# repository, pushed to the stack's registry and referenced by digest.
images = dict(cfg.images.by_trainer())
to_build = trainers_to_build(cfg)
if to_build:
    built = TrainerImages(
        "images",
        TrainerImagesArgs(
            registry_url=registry.url,
            builder=cfg.image_builder,
            trainers=to_build,
            project=cfg.project,
            region=cfg.region,
        ),
        after_apis,
    )
    images.update(built.refs)
    pulumi.export("images", built.refs)

# Datasets: staged into the bucket by awaited in-cluster Jobs, before the runs that read them.
staging = DatasetStaging(
    "datasets",
    DatasetStagingArgs(
        config=cfg,
        provider=kube.provider,
        images=images,
        stager_member=identity.stager_member,
        depends_on=[cluster.cluster, storage.bucket, *workspace.pod_dependencies],
    ),
    after_apis,
)

runs = Runs(
    "runs",
    RunsArgs(
        runs=cfg.runs,
        contracts=pools.contracts,
        bucket=cfg.data_bucket,
        images=images,
        provider=kube.provider,
        data_paths=cfg.data_paths(),
        depends_on=[jobset.release, storage.bucket, *workspace.pod_dependencies, *staging.jobs.values(), *queue_ready],
    ),
)
pulumi.export("runs", sorted(runs.jobsets))
pulumi.export("datasets", {name: f"gs://{cfg.data_bucket}/datasets/{name}/" for name in staging.jobs})
