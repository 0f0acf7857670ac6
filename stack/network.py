"""The stack's network (`network:`): a VPC the stack creates, or one it is given.

Defaults a newcomer can use as they are: a VPC and subnet of the stack's
own, with secondary ranges for pods and services (VPC-native, which
Autopilot and TPU pools require), private nodes with Cloud NAT so Hub,
registry and pip downloads still work, and a control plane reachable only
through its DNS-based endpoint, where Google Cloud IAM authorizes every
request, unless `authorizedNetworks` opens its IP endpoint to those ranges
(and to them only).
https://cloud.google.com/kubernetes-engine/docs/concepts/alias-ips
https://cloud.google.com/kubernetes-engine/docs/how-to/private-clusters
"""

from __future__ import annotations

import ipaddress

from pydantic import Field, StrictBool, model_validator

from stack.models import StackModel
from stack.problems import Problem, raise_problems

# 10.0.0.0/20: 4,096 node addresses. Pods: a /14 gives 1,024 nodes their /24
# (110 pods each). Services: 4,096 ClusterIPs.
DEFAULT_NODES = "10.0.0.0/20"
DEFAULT_PODS = "10.16.0.0/14"
DEFAULT_SERVICES = "10.20.0.0/20"
PODS_RANGE = "pods"
SERVICES_RANGE = "services"
_PRIVATE = [ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")]


class NetworkConfig(StackModel):
    """The cluster's network. Leave `existing` unset to let the stack create one."""

    existing: str | None = Field(default=None, description="an existing VPC (name or self link) to use")
    existing_subnetwork: str | None = Field(default=None, description="its subnetwork, with pods/services ranges")
    pods_range_name: str = PODS_RANGE
    services_range_name: str = SERVICES_RANGE
    nodes_cidr: str = DEFAULT_NODES
    pods_cidr: str = DEFAULT_PODS
    services_cidr: str = DEFAULT_SERVICES
    private_nodes: StrictBool = Field(default=True, description="nodes without external IPs; Cloud NAT for egress")
    authorized_networks: tuple[str, ...] = Field(
        default=(),
        description="CIDRs allowed to reach the control plane's IP endpoint; empty: none (DNS-based endpoint with IAM)",
    )

    @model_validator(mode="after")
    def _rules(self) -> NetworkConfig:
        raise_problems(network_problems(self))
        return self

    @property
    def creates(self) -> bool:
        return self.existing is None

    @property
    def dns_endpoint(self) -> bool:
        """Clients reach the control plane through its DNS-based endpoint (no authorized networks)."""
        return not self.authorized_networks

    def control_plane_access(self) -> str:
        """What can reach the control plane, in words (the plan prints it)."""
        if self.dns_endpoint:
            return ("DNS-based endpoint only, every request authorized by Google Cloud IAM "
                    "(container.clusters.connect); IP endpoint closed to all outside networks")
        return f"IP endpoint from {', '.join(self.authorized_networks)} only; no DNS-based endpoint"


def network_problems(n: NetworkConfig) -> list[Problem]:
    problems = []
    if n.existing and not n.existing_subnetwork:
        problems.append(Problem("existingSubnetwork", None, f"must name the subnetwork of network {n.existing!r}",
                                "a subnetwork in gcp:region with secondary ranges for pods and services"))
    if n.existing_subnetwork and not n.existing:
        problems.append(Problem("existing", None, "must name the network of `existingSubnetwork`", "a VPC name"))
    ranges = {}
    for key in ("nodesCidr", "podsCidr", "servicesCidr"):
        value = getattr(n, {"nodesCidr": "nodes_cidr", "podsCidr": "pods_cidr", "servicesCidr": "services_cidr"}[key])
        try:
            network = ipaddress.ip_network(value)
        except ValueError:
            problems.append(Problem(key, value, "is not an IPv4 CIDR range", "e.g. 10.0.0.0/20"))
            continue
        if not any(network.subnet_of(p) for p in _PRIVATE if p.version == network.version):
            problems.append(Problem(key, value, "is not a private range", "RFC 1918 or 100.64.0.0/10"))
        ranges[key] = network
    keys = list(ranges)
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            if ranges[a].overlaps(ranges[b]):
                problems.append(Problem(b, str(ranges[b]), f"overlaps {a} {ranges[a]}", "disjoint ranges"))
    for j, cidr in enumerate(n.authorized_networks):
        try:
            network = ipaddress.ip_network(cidr)
        except ValueError:
            problems.append(Problem(f"authorizedNetworks[{j}]", cidr, "is not a CIDR range", "e.g. 203.0.113.0/24"))
            continue
        if network.prefixlen == 0:
            problems.append(Problem(f"authorizedNetworks[{j}]", cidr, "opens the control plane to every address",
                                    "the ranges your clients use, e.g. 203.0.113.0/24; or none (DNS-based endpoint)"))
    return problems
