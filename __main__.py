"""gke-finetune: wires the platform components for the selected stack.

The stack file is read and validated first (stack/reader.py); nothing is
declared if it is invalid. Every decision lives in the layers below: this
file only connects the components' inputs and outputs.

Two ways to a cluster: the stack's own (below: APIs, network, cluster, node
pools, bucket, registry, images), or one that exists already
(`existingCluster`, components/existing_cluster.py: a Kubernetes provider,
and the bucket grants when the stack asks for them). Both end in the same
in-cluster parts (components/in_cluster.py): the runs' workspace, the
controllers, the queues, the staging Jobs and the runs.
"""

import pulumi

from components import bucket_preflight
from components.apis import ProjectApis, ProjectApisArgs
from components.cluster import Cluster, ClusterArgs
from components.existing_cluster import existing_cluster
from components.firewall import WebhookFirewall, WebhookFirewallArgs
from components.identity import Identity, IdentityArgs, member_of
from components.images import trainer_images
from components.in_cluster import Footing, in_cluster
from components.kube import KubernetesAccess, KubernetesAccessArgs, cluster_identifier
from components.network import Network, NetworkArgs
from components.node_pools import NodePools, NodePoolsArgs
from components.registry import Registry, RegistryArgs
from components.storage import DataBucket, DataBucketArgs
from admission.check import admit
from stack import reader
from stack.apis import required_apis
from stack.problems import ConfigError

# The stack file, validated; then every run against what GKE admits and schedules; then its bucket, as it is
# (an existing bucket's settings, the runs kept on the prefixes they were deployed with, the folders there).
# A refusal is its message alone in `pulumi preview` and `up`, without a traceback (reader.refused).
try:
    cfg, bucket = bucket_preflight.check(admit(reader.load()))
except ConfigError as err:
    raise reader.refused(err) from None

if cfg.existing:
    footing = existing_cluster(cfg, bucket)
else:
    # Every other resource waits for the APIs it may use.
    apis = ProjectApis("apis", ProjectApisArgs(project=cfg.project, services=required_apis(cfg)))
    after_apis = apis.dependents

    identity = Identity("identity", IdentityArgs(
        project=cfg.project, stack=cfg.stack, namespace=cfg.runs_namespace, trainer_account=cfg.trainer_account,
        stager_account=cfg.stager_account, project_number=cfg.project_number,
        server_account=cfg.server_account if cfg.serve else ""), after_apis)
    registry = Registry(
        "registry",
        RegistryArgs(
            project=cfg.project,
            region=cfg.region,
            repository_id=cfg.registry_id,
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
            runs=[run.name for run in cfg.runs],
            layout=cfg.bucket_layout,
            datasets=[d.name for d in cfg.datasets],
            existing_folders=bucket.folders,
            exports=cfg.export_prefixes(),
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
            identifier=cluster_identifier(cfg.project, cfg.region, cfg.gke_cluster_name),
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
    if identity.server_member is not None:
        pulumi.export("serverPrincipal", identity.server_member)
    # Trainer images: pinned by digest in the stack file, or built from this
    # repository, pushed to the stack's registry (or imageBuild.registry) and referenced by digest.
    images = trainer_images(cfg, registry.url, after_apis)
    footing = Footing(
        provider=kube.provider, images=images, contracts=pools.contracts, stager_member=identity.stager_member,
        trainer_member=identity.trainer_member,
        controller_nodes=system_nodes, cluster=[cluster.cluster],
        bucket=[storage.bucket, *storage.grants, *storage.folders],
        server_member=identity.server_member, opts=after_apis,
    )

in_cluster(cfg, footing)
