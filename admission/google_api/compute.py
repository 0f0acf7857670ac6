"""The VPC, its subnet, the Cloud Router and NAT, the webhook firewall rule: Pulumi inputs -> Compute's beta API.

The beta provider's Compute resources are generated (Magic Modules) and call
https://compute.googleapis.com/compute/beta/ (services/compute/product.go);
each create function builds its body field by field (`obj["..."] = ...`),
references to other resources through tpgresource's relative links. A NAT
is not a resource of its own in the API: the provider patches the router
with the NAT appended to its `nats` (resource_compute_router_nat.go,
`resourceComputeRouterNatPatchCreateEncoder`). A router and a NAT the
program leaves unnamed are named by the bridge (pulumi-gcp resources.go
`lowercaseAutoName`).
"""

from __future__ import annotations

from admission.google_api.rules import Field, NotSent, Param, ResourceMapping, global_link

API = "compute.beta"


NETWORK = ResourceMapping(
    type="gcp:compute/network:Network",
    api=API,
    method="compute.networks.insert",
    params={"project": "{project}"},
    source="resource_compute_network.go resourceComputeNetworkCreate",
    fields={
        "project": Param("project"),
        "name": Field("name"),
        "autoCreateSubnetworks": Field("autoCreateSubnetworks"),
        # resourceComputeNetworkCreate: deletes the network's default routes once it exists.
        "deleteDefaultRoutesOnCreate": NotSent("the provider deletes the default routes after the network exists"),
        # expandComputeNetworkRoutingConfig: `routing_mode` is routingConfig.routingMode.
        "routingMode": Field("routingConfig.routingMode", source="resource_compute_network.go "
                             "expandComputeNetworkRoutingConfig"),
    },
)

SUBNETWORK = ResourceMapping(
    type="gcp:compute/subnetwork:Subnetwork",
    api=API,
    method="compute.subnetworks.insert",
    params={"project": "{project}", "region": "{region}"},
    source="resource_compute_subnetwork.go resourceComputeSubnetworkCreate",
    fields={
        "project": Param("project"),
        # The provider sends it in the body too (expandComputeSubnetworkRegion, a relative link);
        # the URL's is the one Google's definition constrains (its pattern).
        "region": Param("region"),
        "name": Field("name"),
        "network": Field("network", global_link("networks"), "resource_compute_subnetwork.go "
                         "expandComputeSubnetworkNetwork"),
        "ipCidrRange": Field("ipCidrRange"),
        "secondaryIpRanges[].rangeName": Field("secondaryIpRanges[].rangeName"),
        "secondaryIpRanges[].ipCidrRange": Field("secondaryIpRanges[].ipCidrRange"),
        "privateIpGoogleAccess": Field("privateIpGoogleAccess"),
        "sendSecondaryIpRangeIfEmpty": NotSent("how the provider updates an emptied list, never in a create"),
    },
)

ROUTER = ResourceMapping(
    type="gcp:compute/router:Router",
    api=API,
    method="compute.routers.insert",
    params={"project": "{project}", "region": "{region}"},
    source="resource_compute_router.go resourceComputeRouterCreate",
    # The body's `region` too (expandComputeRouterRegion), which Google marks output only and ignores.
    fields={
        "project": Param("project"),
        "region": Param("region"),
        "name": Field("name"),
        "network": Field("network", global_link("networks"), "resource_compute_router.go expandComputeRouterNetwork"),
    },
    autoname=True,
)

_NAT = "nats[0]"

ROUTER_NAT = ResourceMapping(
    type="gcp:compute/routerNat:RouterNat",
    api=API,
    method="compute.routers.patch",
    params={"project": "{project}", "region": "{region}", "router": "{router}"},
    source="resource_compute_router_nat.go resourceComputeRouterNatCreate (resourceComputeRouterNatPatchCreateEncoder)",
    fields={
        "project": Param("project"),
        "region": Param("region"),
        "router": Param("router"),
        "name": Field(f"{_NAT}.name"),
        "natIpAllocateOption": Field(f"{_NAT}.natIpAllocateOption"),
        "sourceSubnetworkIpRangesToNat": Field(f"{_NAT}.sourceSubnetworkIpRangesToNat"),
        "minPortsPerVm": Field(f"{_NAT}.minPortsPerVm"),
        "logConfig.enable": Field(f"{_NAT}.logConfig.enable"),
        "logConfig.filter": Field(f"{_NAT}.logConfig.filter"),
    },
    autoname=True,
)

FIREWALL = ResourceMapping(
    type="gcp:compute/firewall:Firewall",
    api=API,
    method="compute.firewalls.insert",
    params={"project": "{project}"},
    source="resource_compute_firewall.go resourceComputeFirewallCreate",
    fields={
        "project": Param("project"),
        "name": Field("name"),
        "description": Field("description"),
        "network": Field("network", global_link("networks"), "resource_compute_firewall.go "
                         "expandComputeFirewallNetwork"),
        "direction": Field("direction"),
        "sourceRanges": Field("sourceRanges"),
        "targetTags": Field("targetTags"),
        # expandComputeFirewallAllow: `allow` blocks are `allowed`, their `protocol` is `IPProtocol`.
        "allows[].protocol": Field("allowed[].IPProtocol", source="resource_compute_firewall.go "
                                   "expandComputeFirewallAllow"),
        "allows[].ports": Field("allowed[].ports", source="resource_compute_firewall.go expandComputeFirewallAllow"),
    },
)
