"""`network:`: defaults a newcomer can use, a given VPC, and each bad input named by its key."""

import pytest

from stack.config import StackConfig
from stack.problems import ConfigError

BASE = {"project": "my-project-id", "region": "us-east5", "zones": ["us-east5-b"]}


def problems(network) -> list[str]:
    with pytest.raises(ConfigError) as err:
        StackConfig.from_mapping({**BASE, "network": network})
    return err.value.problems


def test_the_default_network_is_created_private_with_disjoint_ranges():
    n = StackConfig.from_mapping(BASE).network
    assert n.creates and n.private_nodes and n.authorized_networks == ()
    assert (n.nodes_cidr, n.pods_cidr, n.services_cidr) == ("10.0.0.0/20", "10.16.0.0/14", "10.20.0.0/20")


def test_an_existing_network_is_used_as_given():
    n = StackConfig.from_mapping({**BASE, "network": {"existing": "shared-vpc", "existingSubnetwork": "gke",
                                                       "podsRangeName": "gke-pods"}}).network
    assert not n.creates and n.pods_range_name == "gke-pods"


@pytest.mark.parametrize("network, expected", [
    ({"existing": "vpc"}, "network.existingSubnetwork: None must name the subnetwork of network 'vpc'"),
    ({"existingSubnetwork": "s"}, "network.existing: None must name the network"),
    ({"podsCidr": "10.0.0.0/16"}, "network.podsCidr: '10.0.0.0/16' overlaps nodesCidr 10.0.0.0/20"),
    ({"nodesCidr": "8.8.8.0/24"}, "network.nodesCidr: '8.8.8.0/24' is not a private range"),
    ({"servicesCidr": "10.300.0.0/20"}, "network.servicesCidr: '10.300.0.0/20' is not an IPv4 CIDR range"),
    ({"authorizedNetworks": ["my office"]}, "network.authorizedNetworks[0]: 'my office' is not a CIDR range"),
    ({"privateNodes": "yes"}, "network.privateNodes: 'yes'"),
    ({"vpc": "x"}, "network.vpc: 'x' is an unknown key"),
])  # fmt: skip
def test_bad_network_input_is_rejected_naming_the_key(network, expected):
    lines = problems(network)
    assert any(line.startswith(expected) for line in lines), lines
