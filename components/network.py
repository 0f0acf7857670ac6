"""The cluster's network: the stack's own VPC and subnet (or a given one), and Cloud NAT for private nodes.

The subnet carries the secondary ranges the cluster's pods and services
take their addresses from (VPC-native). Nodes without external addresses
reach the Hugging Face Hub, PyPI and registries through Cloud NAT on a
Cloud Router; Google APIs through Private Google Access.
https://cloud.google.com/kubernetes-engine/docs/concepts/alias-ips
https://cloud.google.com/nat/docs/gke-example
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from core.ids import network_name, subnetwork_name
from stack.network import NetworkConfig


@dataclass
class NetworkArgs:
    project: str
    region: str
    stack: str
    config: NetworkConfig


class Network(pulumi.ComponentResource):
    """`network` and `subnetwork` are what the cluster is placed in (ids, or the given names)."""

    network: pulumi.Input[str]
    subnetwork: pulumi.Input[str]
    pods_range_name: str
    services_range_name: str

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-finetune:platform:Network", name, None, opts)
        cfg, child = args.config, pulumi.ResourceOptions(parent=self)
        self.pods_range_name, self.services_range_name = cfg.pods_range_name, cfg.services_range_name
        if cfg.creates:
            self.network, self.subnetwork = self._create(name, args, child)
        else:
            self.network, self.subnetwork = cfg.existing, cfg.existing_subnetwork
        if cfg.private_nodes:
            self._nat(name, args, child)
        self.register_outputs({"network": self.network, "subnetwork": self.subnetwork})

    def _create(self, name: str, args: NetworkArgs, child: pulumi.ResourceOptions):
        cfg = args.config
        vpc = gcp.compute.Network(
            name, project=args.project, name=network_name(args.stack), auto_create_subnetworks=False,
            routing_mode="REGIONAL", opts=child,
        )
        subnet = gcp.compute.Subnetwork(
            f"{name}-nodes",
            project=args.project,
            region=args.region,
            name=subnetwork_name(args.stack),
            network=vpc.id,
            ip_cidr_range=cfg.nodes_cidr,
            secondary_ip_ranges=[
                gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name=cfg.pods_range_name, ip_cidr_range=cfg.pods_cidr),
                gcp.compute.SubnetworkSecondaryIpRangeArgs(
                    range_name=cfg.services_range_name, ip_cidr_range=cfg.services_cidr
                ),
            ],
            # Google APIs (GCS, Artifact Registry) without external addresses.
            private_ip_google_access=True,
            opts=child,
        )
        return vpc.id, subnet.id

    def _nat(self, name: str, args: NetworkArgs, child: pulumi.ResourceOptions) -> None:
        router = gcp.compute.Router(
            f"{name}-router", project=args.project, region=args.region, network=self.network, opts=child
        )
        gcp.compute.RouterNat(
            f"{name}-nat",
            project=args.project,
            region=args.region,
            router=router.name,
            nat_ip_allocate_option="AUTO_ONLY",
            source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
            log_config=gcp.compute.RouterNatLogConfigArgs(enable=True, filter="ERRORS_ONLY"),
            opts=child,
        )
