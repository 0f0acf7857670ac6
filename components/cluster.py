"""The GKE cluster: Standard (with a small system pool) or Autopilot."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from core.ids import node_network_tag, workload_identity_pool
from core.names import SYSTEM_POOL
from stack.config import StackConfig

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


@dataclass
class ClusterArgs:
    config: StackConfig
    node_service_account: pulumi.Input[str]  # email
    network: pulumi.Input[str]
    subnetwork: pulumi.Input[str]
    pods_range_name: str
    services_range_name: str


def _private(cfg: StackConfig) -> gcp.container.ClusterPrivateClusterConfigArgs | None:
    """Nodes without external addresses (egress through Cloud NAT). pulumi_gcp container/_inputs.py."""
    if not cfg.network.private_nodes:
        return None
    return gcp.container.ClusterPrivateClusterConfigArgs(enable_private_nodes=True, enable_private_endpoint=False)


def _endpoints(cfg: StackConfig) -> gcp.container.ClusterControlPlaneEndpointsConfigArgs:
    """How clients reach the control plane (stack/network.py, `control_plane_access`).

    By default only through its DNS-based endpoint, where Google Cloud IAM
    authorizes every request (`container.clusters.connect`) before Kubernetes
    RBAC does; a client needs no network path to the cluster. With
    `authorizedNetworks`, through the IP endpoint from those ranges only.
    https://cloud.google.com/kubernetes-engine/docs/concepts/network-isolation#dns-based_endpoint
    """
    return gcp.container.ClusterControlPlaneEndpointsConfigArgs(
        dns_endpoint_config=gcp.container.ClusterControlPlaneEndpointsConfigDnsEndpointConfigArgs(
            allow_external_traffic=cfg.network.dns_endpoint
        ),
    )


def _authorized(cfg: StackConfig) -> gcp.container.ClusterMasterAuthorizedNetworksConfigArgs:
    """The IP endpoint's allow-list: the stack's `authorizedNetworks`, else none at all.

    Authorized networks on with no range, and Google Cloud's public addresses
    not let in, close the IP endpoint to every outside client; the nodes still
    reach the control plane over its private endpoint (authorized networks are
    not enforced there unless asked: `private_endpoint_enforcement_enabled`).
    https://cloud.google.com/kubernetes-engine/docs/how-to/latest/network-isolation
    """
    return gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(
        cidr_blocks=[
            gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(cidr_block=c, display_name=f"authorized-{i}")
            for i, c in enumerate(cfg.network.authorized_networks)
        ],
        gcp_public_cidrs_access_enabled=False,
    )


def node_tags(cfg: StackConfig) -> list[str]:
    """The network tag of every node of the stack, which the webhook firewall rule targets."""
    return [node_network_tag(cfg.stack)]


def shielded() -> gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs:
    return gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
        enable_secure_boot=True, enable_integrity_monitoring=True
    )


def _control_plane_range(private) -> str | None:
    """The source of the control plane's connections to the nodes: the /28 of a VPC-peering
    private cluster, else (Private Service Connect) its private endpoint's address; None for a
    cluster without private nodes, which needs no rule. A cluster with private nodes that
    reports neither, once created, fails the update here rather than leaving a rule without
    a source (on preview of a new cluster the endpoint is not assigned yet).
    https://cloud.google.com/kubernetes-engine/docs/how-to/latest/network-isolation#add_firewall_rules"""
    if private is None or not private.enable_private_nodes:
        return None
    if private.master_ipv4_cidr_block:
        return private.master_ipv4_cidr_block
    if private.private_endpoint:
        return f"{private.private_endpoint}/32"
    if pulumi.runtime.is_dry_run():
        return None  # a preview of a cluster to be created: GKE has not assigned the endpoint yet
    raise ValueError("the cluster has private nodes but GKE reports neither privateClusterConfig."
                     "masterIpv4CidrBlock nor privateClusterConfig.privateEndpoint: the control plane's "
                     "source range for the webhook firewall rule is unknown")


class Cluster(pulumi.ComponentResource):
    """A regional cluster; on Standard also the system node pool controllers run on."""

    cluster: gcp.container.Cluster
    system_pool: gcp.container.NodePool | None
    name: pulumi.Output[str]
    location: pulumi.Output[str]
    endpoint: pulumi.Output[str]  # the DNS-based endpoint's name, or the IP endpoint's address
    dns_endpoint: bool
    ca_certificate: pulumi.Output[str]
    control_plane_range: pulumi.Output[str]  # where the control plane reaches the nodes from

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-finetune:platform:Cluster", name, None, opts)
        cfg = args.config
        build = self._autopilot if cfg.autopilot else self._standard
        self.cluster = build(name, args)
        self.system_pool = None if cfg.autopilot else self._system_pool(name, args)
        self.name = self.cluster.name
        self.location = self.cluster.location
        self.dns_endpoint = cfg.network.dns_endpoint
        if self.dns_endpoint:
            self.endpoint = self.cluster.control_plane_endpoints_config.apply(lambda c: c.dns_endpoint_config.endpoint)
        else:
            self.endpoint = self.cluster.endpoint
        self.ca_certificate = self.cluster.master_auth.cluster_ca_certificate
        self.control_plane_range = self.cluster.private_cluster_config.apply(_control_plane_range)
        self.register_outputs({"name": self.name, "location": self.location})

    def _common(self, args: ClusterArgs) -> dict:
        cfg = args.config
        return dict(
            project=cfg.project,
            name=cfg.gke_cluster_name,
            location=cfg.region,
            release_channel=gcp.container.ClusterReleaseChannelArgs(channel=cfg.release_channel),
            deletion_protection=cfg.deletion_protection,
            # VPC-native (alias IPs), required by Autopilot and by TPU node pools,
            # in the stack's network (components/network.py).
            network=args.network,
            subnetwork=args.subnetwork,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(
                cluster_secondary_range_name=args.pods_range_name,
                services_secondary_range_name=args.services_range_name,
            ),
            private_cluster_config=_private(cfg),
            control_plane_endpoints_config=_endpoints(cfg),
            master_authorized_networks_config=_authorized(cfg),
            # The Hugging Face token reaches the pods that read the Hub from Secret Manager through GKE's
            # add-on (manifests/token.py), on Standard and Autopilot alike; only a stack that needs it has it.
            # https://cloud.google.com/secret-manager/docs/secret-manager-managed-csi-component
            **({"secret_manager_config": gcp.container.ClusterSecretManagerConfigArgs(enabled=True)}
               if cfg.reads_hub else {}),
        )

    def _standard(self, name: str, args: ClusterArgs) -> gcp.container.Cluster:
        cfg = args.config
        return gcp.container.Cluster(
            name,
            **self._common(args),
            # The default pool is replaced by the system pool below; GKE still
            # creates it briefly, so it gets the least-privilege account too.
            remove_default_node_pool=True,
            initial_node_count=1,
            node_config=gcp.container.ClusterNodeConfigArgs(
                service_account=args.node_service_account,
                oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                tags=node_tags(cfg),
                shielded_instance_config=gcp.container.ClusterNodeConfigShieldedInstanceConfigArgs(
                    enable_secure_boot=True, enable_integrity_monitoring=True
                ),
            ),
            enable_shielded_nodes=True,
            workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
                workload_pool=workload_identity_pool(cfg.project)
            ),
            # https://cloud.google.com/kubernetes-engine/docs/how-to/persistent-volumes/cloud-storage-fuse-csi-driver-setup
            addons_config=gcp.container.ClusterAddonsConfigArgs(
                gcs_fuse_csi_driver_config=gcp.container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(
                    enabled=True
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _autopilot(self, name: str, args: ClusterArgs) -> gcp.container.Cluster:
        # Autopilot always has Workload Identity, shielded nodes and the GCS FUSE
        # driver; what it lets us choose is the account of the nodes it creates.
        # https://cloud.google.com/kubernetes-engine/docs/concepts/autopilot-security
        return gcp.container.Cluster(
            name,
            **self._common(args),
            enable_autopilot=True,
            # The nodes Autopilot creates carry the stack's tag too (the webhook firewall rule).
            # https://cloud.google.com/kubernetes-engine/docs/how-to/autopilot-network-tags
            node_pool_auto_config=gcp.container.ClusterNodePoolAutoConfigArgs(
                network_tags=gcp.container.ClusterNodePoolAutoConfigNetworkTagsArgs(tags=node_tags(args.config))
            ),
            cluster_autoscaling=gcp.container.ClusterClusterAutoscalingArgs(
                auto_provisioning_defaults=gcp.container.ClusterClusterAutoscalingAutoProvisioningDefaultsArgs(
                    service_account=args.node_service_account,
                    oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _system_pool(self, name: str, args: ClusterArgs) -> gcp.container.NodePool:
        cfg = args.config
        return gcp.container.NodePool(
            f"{name}-system",
            project=cfg.project,
            cluster=self.cluster.id,
            location=cfg.region,
            name=SYSTEM_POOL,
            node_count=cfg.system_node_count,  # per zone of the regional cluster
            management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type=cfg.system_machine_type,
                service_account=args.node_service_account,
                tags=node_tags(cfg),
                oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
                    mode="GKE_METADATA"
                ),
                shielded_instance_config=shielded(),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
