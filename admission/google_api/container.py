"""The cluster and its node pools: Pulumi inputs -> GKE's v1beta1 API (the beta provider's client).

terraform-provider-google-beta creates a cluster with
`container.projects.locations.clusters.create` (resource_container_cluster.go
`resourceContainerClusterCreate`) and a node pool with
`...clusters.nodePools.create` (resource_container_node_pool.go
`resourceContainerNodePoolCreate`, body from `expandNodePool`), through
google.golang.org/api/container/v1beta1; a node configuration goes through
node_config.go `expandNodeConfig` in both.
"""

from __future__ import annotations

from admission.google_api.rules import (
    Field,
    NotSent,
    Param,
    ResourceMapping,
    each,
    global_link,
    last_segment,
    negated,
    one_of,
    regional_link,
    scope,
    targets,
    within,
)

API = "container.v1beta1"
# The provider's schema for `networking_mode` (a Terraform attribute, no API field of that name).
_NETWORKING_MODE = one_of("VPC_NATIVE", "ROUTES", source="resource_container_cluster.go networking_mode")


def _uses_ip_aliases(value, inputs):
    """expandIPAllocationPolicy: VPC_NATIVE is `useIpAliases` true (ROUTES: false, and `useRoutes`)."""
    return _NETWORKING_MODE(value, inputs) == "VPC_NATIVE"
_NODE_CONFIG_SOURCE = "node_config.go expandNodeConfig"

# expandNodeConfig: the block's fields keep their names, but for the ones renamed here.
NODE_CONFIG = {
    "machineType": Field("machineType"),
    "diskSizeGb": Field("diskSizeGb"),
    "diskType": Field("diskType"),
    "serviceAccount": Field("serviceAccount"),
    # tpgresource.CanonicalizeServiceScope turns gcloud's short names into scope URLs.
    "oauthScopes": Field("oauthScopes", each(scope), _NODE_CONFIG_SOURCE),
    "tags": Field("tags"),
    "labels": Field("labels"),
    # Terraform's `taint` blocks; NodeTaint keeps key, value, effect.
    "taints[].key": Field("taints[].key"),
    "taints[].value": Field("taints[].value"),
    "taints[].effect": Field("taints[].effect"),
    "spot": Field("spot"),
    "flexStart": Field("flexStart"),
    # Inputs the program leaves unset, sent with the defaults pulumi-gcp documents (defaults.py).
    "localSsdCount": Field("localSsdCount"),
    "preemptible": Field("preemptible"),
    "advancedMachineFeatures.enableNestedVirtualization": Field("advancedMachineFeatures.enableNestedVirtualization"),
    "bootDisk.diskType": Field("bootDisk.diskType"),
    # `guest_accelerator` becomes AcceleratorConfig: type -> acceleratorType, count -> acceleratorCount (int64).
    "guestAccelerators[].type": Field("accelerators[].acceleratorType", source=_NODE_CONFIG_SOURCE),
    "guestAccelerators[].count": Field("accelerators[].acceleratorCount", source=_NODE_CONFIG_SOURCE),
    "guestAccelerators[].gpuDriverInstallationConfig.gpuDriverVersion":
        Field("accelerators[].gpuDriverInstallationConfig.gpuDriverVersion"),
    "ephemeralStorageLocalSsdConfig.localSsdCount": Field("ephemeralStorageLocalSsdConfig.localSsdCount"),
    "gvnic.enabled": Field("gvnic.enabled"),
    "reservationAffinity.consumeReservationType": Field("reservationAffinity.consumeReservationType"),
    "reservationAffinity.key": Field("reservationAffinity.key"),
    "reservationAffinity.values": Field("reservationAffinity.values"),
    "workloadMetadataConfig.mode": Field("workloadMetadataConfig.mode"),
    "shieldedInstanceConfig.enableSecureBoot": Field("shieldedInstanceConfig.enableSecureBoot"),
    "shieldedInstanceConfig.enableIntegrityMonitoring": Field("shieldedInstanceConfig.enableIntegrityMonitoring"),
}

_CLUSTER_CREATE = "resource_container_cluster.go resourceContainerClusterCreate"
_ENDPOINTS = "cluster.controlPlaneEndpointsConfig"

CLUSTER = ResourceMapping(
    type="gcp:container/cluster:Cluster",
    api=API,
    method="container.projects.locations.clusters.create",
    params={"parent": "projects/{project}/locations/{location}"},
    source=_CLUSTER_CREATE,
    fields={
        "project": Param("project"),
        "location": Param("location"),
        "name": Field("cluster.name"),
        "deletionProtection": NotSent("the provider refuses to delete the cluster while it is true"),
        "removeDefaultNodePool": NotSent("the provider deletes the default pool once the cluster exists"),
        "initialNodeCount": Field("cluster.initialNodeCount"),
        "releaseChannel.channel": Field("cluster.releaseChannel.channel"),
        # expandSecretManagerConfig: the block as the API's SecretManagerConfig.
        "secretManagerConfig.enabled": Field("cluster.secretManagerConfig.enabled"),
        # ParseNetworkFieldValue(...).RelativeLink(); the subnetwork through ParseRegionalFieldValue
        # with the cluster's location as its region.
        "network": Field("cluster.network", global_link("networks"), _CLUSTER_CREATE),
        "subnetwork": Field("cluster.subnetwork", regional_link("subnetworks", "location"), _CLUSTER_CREATE),
        # expandIPAllocationPolicy: VPC_NATIVE is useIpAliases (ROUTES is useRoutes).
        "networkingMode": Field("cluster.ipAllocationPolicy.useIpAliases", _uses_ip_aliases,
                                "resource_container_cluster.go expandIPAllocationPolicy"),
        "ipAllocationPolicy.clusterSecondaryRangeName": Field("cluster.ipAllocationPolicy.clusterSecondaryRangeName"),
        "ipAllocationPolicy.servicesSecondaryRangeName": Field("cluster.ipAllocationPolicy.servicesSecondaryRangeName"),
        # expandDefaultEnablePrivateNodes: private nodes are the network's default, not a
        # privateClusterConfig field; the private endpoint is the IP endpoint's public one, negated
        # (expandControlPlaneEndpointsConfig).
        "privateClusterConfig.enablePrivateNodes": Field(
            "cluster.networkConfig.defaultEnablePrivateNodes", source="resource_container_cluster.go "
            "expandDefaultEnablePrivateNodes"),
        "privateClusterConfig.enablePrivateEndpoint": Field(
            f"{_ENDPOINTS}.ipEndpointsConfig.enablePublicEndpoint", negated,
            "resource_container_cluster.go expandControlPlaneEndpointsConfig"),
        "controlPlaneEndpointsConfig.dnsEndpointConfig.allowExternalTraffic":
            Field(f"{_ENDPOINTS}.dnsEndpointConfig.allowExternalTraffic"),
        # expandMasterAuthorizedNetworksConfig, called by expandControlPlaneEndpointsConfig: the
        # IP endpoint's authorizedNetworksConfig, enabled by the block's presence.
        "masterAuthorizedNetworksConfig.cidrBlocks[].cidrBlock":
            Field(f"{_ENDPOINTS}.ipEndpointsConfig.authorizedNetworksConfig.cidrBlocks[].cidrBlock"),
        "masterAuthorizedNetworksConfig.cidrBlocks[].displayName":
            Field(f"{_ENDPOINTS}.ipEndpointsConfig.authorizedNetworksConfig.cidrBlocks[].displayName"),
        "masterAuthorizedNetworksConfig.gcpPublicCidrsAccessEnabled":
            Field(f"{_ENDPOINTS}.ipEndpointsConfig.authorizedNetworksConfig.gcpPublicCidrsAccessEnabled"),
        **within("nodeConfig", targets("cluster.nodeConfig", NODE_CONFIG)),
        "enableShieldedNodes": Field("cluster.shieldedNodes.enabled", source=_CLUSTER_CREATE),
        "workloadIdentityConfig.workloadPool": Field("cluster.workloadIdentityConfig.workloadPool"),
        "addonsConfig.gcsFuseCsiDriverConfig.enabled": Field("cluster.addonsConfig.gcsFuseCsiDriverConfig.enabled"),
        "enableAutopilot": Field("cluster.autopilot.enabled", source=_CLUSTER_CREATE),
        # Left unset by the program; judged with the defaults pulumi-gcp documents (defaults.py).
        "loggingService": Field("cluster.loggingService"),
        "monitoringService": Field("cluster.monitoringService"),
        "enableLegacyAbac": Field("cluster.legacyAbac.enabled", source=_CLUSTER_CREATE),
        "enableCiliumClusterwideNetworkPolicy": Field("cluster.networkConfig.enableCiliumClusterwideNetworkPolicy",
                                                      source="resource_container_cluster.go expandNetworkConfig"),
        "allowNetAdmin": Field("cluster.autopilot.workloadPolicyConfig.allowNetAdmin",
                               source="resource_container_cluster.go expandWorkloadPolicyConfig"),
        "controlPlaneEndpointsConfig.ipEndpointsConfig.enabled":
            Field(f"{_ENDPOINTS}.ipEndpointsConfig.enabled"),
        "clusterAutoscaling.autoscalingProfile": Field("cluster.autoscaling.autoscalingProfile"),
        "clusterAutoscaling.autoProvisioningDefaults.diskSize": Field(
            "cluster.autoscaling.autoprovisioningNodePoolDefaults.diskSizeGb",
            source="resource_container_cluster.go expandAutoProvisioningDefaults"),
        "clusterAutoscaling.autoProvisioningDefaults.diskType": Field(
            "cluster.autoscaling.autoprovisioningNodePoolDefaults.diskType"),
        "clusterAutoscaling.autoProvisioningDefaults.shieldedInstanceConfig.enableSecureBoot": Field(
            "cluster.autoscaling.autoprovisioningNodePoolDefaults.shieldedInstanceConfig.enableSecureBoot"),
        "clusterAutoscaling.autoProvisioningDefaults.shieldedInstanceConfig.enableIntegrityMonitoring": Field(
            "cluster.autoscaling.autoprovisioningNodePoolDefaults.shieldedInstanceConfig.enableIntegrityMonitoring"),
        "nodePoolAutoConfig.networkTags.tags": Field("cluster.nodePoolAutoConfig.networkTags.tags"),
        # expandClusterAutoscaling / expandAutoProvisioningDefaults: `cluster_autoscaling` is the
        # API's `autoscaling`, its defaults `autoprovisioningNodePoolDefaults`.
        "clusterAutoscaling.autoProvisioningDefaults.serviceAccount": Field(
            "cluster.autoscaling.autoprovisioningNodePoolDefaults.serviceAccount",
            source="resource_container_cluster.go expandAutoProvisioningDefaults"),
        "clusterAutoscaling.autoProvisioningDefaults.oauthScopes": Field(
            "cluster.autoscaling.autoprovisioningNodePoolDefaults.oauthScopes",
            source="resource_container_cluster.go expandAutoProvisioningDefaults"),
    },
    implied={
        "masterAuthorizedNetworksConfig": ((f"{_ENDPOINTS}.ipEndpointsConfig.authorizedNetworksConfig.enabled", True),),
    },
)

_EXPAND_NODE_POOL = "resource_container_node_pool.go expandNodePool"

NODE_POOL = ResourceMapping(
    type="gcp:container/nodePool:NodePool",
    api=API,
    method="container.projects.locations.clusters.nodePools.create",
    # NodePoolInformation.parent(); `cluster` is the cluster's id or its name.
    params={"parent": "projects/{project}/locations/{location}/clusters/{cluster}"},
    source="resource_container_node_pool.go resourceContainerNodePoolCreate",
    fields={
        "project": Param("project"),
        "location": Param("location"),
        "cluster": Param("cluster", last_segment, "resource_container_node_pool.go extractNodePoolInformation"),
        "name": Field("nodePool.name"),
        # `node_locations` is the pool's `locations`; `node_count` and `initial_node_count` are
        # both its `initialNodeCount` (the provider refuses the two together).
        "nodeLocations": Field("nodePool.locations", source=_EXPAND_NODE_POOL),
        "initialNodeCount": Field("nodePool.initialNodeCount"),
        "nodeCount": Field("nodePool.initialNodeCount", source=_EXPAND_NODE_POOL),
        "autoscaling.minNodeCount": Field("nodePool.autoscaling.minNodeCount"),
        "autoscaling.maxNodeCount": Field("nodePool.autoscaling.maxNodeCount"),
        "autoscaling.totalMinNodeCount": Field("nodePool.autoscaling.totalMinNodeCount"),
        "autoscaling.totalMaxNodeCount": Field("nodePool.autoscaling.totalMaxNodeCount"),
        "autoscaling.locationPolicy": Field("nodePool.autoscaling.locationPolicy"),
        "placementPolicy.type": Field("nodePool.placementPolicy.type"),
        "placementPolicy.tpuTopology": Field("nodePool.placementPolicy.tpuTopology"),
        "queuedProvisioning.enabled": Field("nodePool.queuedProvisioning.enabled"),
        "management.autoRepair": Field("nodePool.management.autoRepair"),
        "management.autoUpgrade": Field("nodePool.management.autoUpgrade"),
        # The pool's node configuration is its `config`.
        **within("nodeConfig", targets("nodePool.config", NODE_CONFIG)),
    },
    # expandNodePool: an `autoscaling` block is autoscaling enabled.
    implied={"autoscaling": (("nodePool.autoscaling.enabled", True),)},
)
