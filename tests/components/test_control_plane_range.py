"""Where the control plane reaches the nodes from, as GKE reports the cluster."""

from types import SimpleNamespace

import pytest

from components.cluster import _control_plane_range


def _private(**fields):
    return SimpleNamespace(**{"enable_private_nodes": True, "master_ipv4_cidr_block": None,
                              "private_endpoint": None, **fields})


def test_a_peering_cluster_gives_its_control_plane_block():
    assert _control_plane_range(_private(master_ipv4_cidr_block="172.16.0.0/28", private_endpoint="172.16.0.2")) \
        == "172.16.0.0/28"


def test_a_psc_cluster_gives_its_private_endpoint_alone():
    assert _control_plane_range(_private(private_endpoint="10.0.0.2")) == "10.0.0.2/32"


def test_a_cluster_without_private_nodes_needs_no_range():
    assert _control_plane_range(None) is None
    assert _control_plane_range(_private(enable_private_nodes=False)) is None


def test_private_nodes_without_a_reported_range_fail_naming_the_fields():
    with pytest.raises(ValueError, match="masterIpv4CidrBlock nor privateClusterConfig.privateEndpoint"):
        _control_plane_range(_private())
