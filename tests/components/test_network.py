"""The network, NAT and private cluster the program declares, for every shipped stack."""

import functools

import pytest

from tests.support.pulumi_harness import SHIPPED_STACKS, run_stack

CLUSTER = "gcp:container/cluster:Cluster"


@functools.cache
def deployed(stack, overrides=None):
    return run_stack(stack, overrides=dict(overrides or ()))


FIREWALL = "gcp:compute/firewall:Firewall"


def only(d, type_token):
    [found] = d.of_type(type_token)
    return found


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_every_stack_has_its_own_vpc_subnet_and_nat(stack):
    d = deployed(stack)
    vpc = only(d, "gcp:compute/network:Network")
    assert vpc.inputs["autoCreateSubnetworks"] is False and vpc.inputs["name"] == f"finetune-{stack}"
    subnet = only(d, "gcp:compute/subnetwork:Subnetwork").inputs
    assert subnet["ipCidrRange"] == "10.0.0.0/20" and subnet["privateIpGoogleAccess"] is True
    assert subnet["secondaryIpRanges"] == [{"rangeName": "pods", "ipCidrRange": "10.16.0.0/14"},
                                           {"rangeName": "services", "ipCidrRange": "10.20.0.0/20"}]
    assert subnet["network"] == "network-id"  # the VPC's id (the mocks name ids <resource>-id)
    nat = only(d, "gcp:compute/routerNat:RouterNat").inputs
    assert nat["natIpAllocateOption"] == "AUTO_ONLY"
    assert nat["sourceSubnetworkIpRangesToNat"] == "ALL_SUBNETWORKS_ALL_IP_RANGES"
    cluster = only(d, CLUSTER).inputs
    assert cluster["network"] == "network-id" and cluster["subnetwork"] == "network-nodes-id"
    assert cluster["ipAllocationPolicy"] == {"clusterSecondaryRangeName": "pods", "servicesSecondaryRangeName": "services"}
    assert cluster["privateClusterConfig"] == {"enablePrivateNodes": True, "enablePrivateEndpoint": False}
    # The control plane: its DNS-based endpoint (IAM) only; no outside network reaches the IP endpoint.
    assert cluster["controlPlaneEndpointsConfig"] == {"dnsEndpointConfig": {"allowExternalTraffic": True}}
    assert cluster["masterAuthorizedNetworksConfig"] == {"cidrBlocks": [], "gcpPublicCidrsAccessEnabled": False}
    # The network waits for the Compute API like everything else.
    api = next(r.urn for r in d.of_type("gcp:projects/service:Service") if r.inputs["service"] == "compute.googleapis.com")
    assert api in only(d, "gcp:compute/network:Network").dependencies


def test_an_existing_network_is_used_and_public_nodes_need_no_nat():
    network = {"existing": "shared-vpc", "existingSubnetwork": "gke-east", "podsRangeName": "p",
               "servicesRangeName": "s", "privateNodes": False, "authorizedNetworks": ["203.0.113.0/24"]}
    d = run_stack("dev", overrides={"gke-finetune:network": network})
    assert not d.of_type("gcp:compute/network:Network") and not d.of_type("gcp:compute/routerNat:RouterNat")
    cluster = only(d, CLUSTER).inputs
    assert (cluster["network"], cluster["subnetwork"]) == ("shared-vpc", "gke-east")
    assert cluster["ipAllocationPolicy"] == {"clusterSecondaryRangeName": "p", "servicesSecondaryRangeName": "s"}
    assert "privateClusterConfig" not in cluster
    assert cluster["masterAuthorizedNetworksConfig"] == {
        "cidrBlocks": [{"cidrBlock": "203.0.113.0/24", "displayName": "authorized-0"}],
        "gcpPublicCidrsAccessEnabled": False}
    assert cluster["controlPlaneEndpointsConfig"] == {"dnsEndpointConfig": {"allowExternalTraffic": False}}
    # Public nodes: no webhook firewall rule (nothing blocks the control plane).
    assert not d.of_type(FIREWALL)


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_private_nodes_let_the_control_plane_reach_the_installed_webhooks_and_nothing_more(stack):
    d = deployed(stack)
    [rule] = d.of_type(FIREWALL)
    kueue = any(r.inputs["name"] == "kueue" for r in d.of_type("kubernetes:helm.sh/v3:Release"))
    expected = ["8082", "9443"] if kueue else ["9443"]
    assert rule.inputs["allows"] == [{"protocol": "tcp", "ports": expected}]
    assert rule.inputs["direction"] == "INGRESS" and rule.inputs["network"] == "network-id"
    assert rule.inputs["sourceRanges"] == ["10.0.0.2/32"]  # the control plane's PSC endpoint (mocks)
    # Every node of the stack carries the rule's target tag.
    tag = rule.inputs["targetTags"]
    cluster = only(d, CLUSTER).inputs
    tagged = [cluster["nodePoolAutoConfig"]["networkTags"]["tags"]] if cluster.get("enableAutopilot") else [
        p.inputs["nodeConfig"]["tags"] for p in d.of_type("gcp:container/nodePool:NodePool")]
    assert tagged and all(t == tag for t in tagged)
    # The controllers (and so the runs) wait for the rule.
    for release in d.of_type("kubernetes:helm.sh/v3:Release"):
        if release.inputs["name"] == "jobset":
            assert rule.urn in release.dependencies


def test_the_control_plane_is_never_opened_to_every_address():
    from pydantic import ValidationError

    from stack.network import NetworkConfig

    with pytest.raises(ValidationError, match=r"authorizedNetworks\[0\]: '0.0.0.0/0' opens the control plane"):
        NetworkConfig(authorized_networks=("0.0.0.0/0",))
