"""The firewall rule that lets the control plane reach the controllers' webhooks on private nodes.

GKE's own rule for a cluster with private nodes lets the control plane
reach the nodes on 443 and 10250 only; the JobSet and Kueue webhooks (and
Kueue's visibility API) listen on other ports (manifests/controllers.py),
with `failurePolicy: Fail`, so without this rule every JobSet and Kueue
object times out at admission. The rule opens exactly those TCP ports, from
the control plane's address (its /28, or its Private Service Connect
endpoint) to the stack's own nodes (their network tag), and nothing else.
https://cloud.google.com/kubernetes-engine/docs/how-to/latest/network-isolation#add_firewall_rules
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.cluster import node_tags
from core.ids import webhook_firewall_name
from manifests.controllers import webhook_ports
from stack.config import StackConfig


@dataclass
class WebhookFirewallArgs:
    config: StackConfig
    network: pulumi.Input[str]
    control_plane_range: pulumi.Input[str]


class WebhookFirewall(pulumi.ComponentResource):
    """`rule` allows the webhooks' TCP ports from the control plane to the stack's tagged nodes."""

    rule: gcp.compute.Firewall

    def __init__(self, name: str, args: WebhookFirewallArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-finetune:platform:WebhookFirewall", name, None, opts)
        cfg = args.config
        ports = webhook_ports(kueue=bool(cfg.kueue_flavors()))
        self.rule = gcp.compute.Firewall(
            name,
            project=cfg.project,
            name=webhook_firewall_name(cfg.stack),
            description="The GKE control plane to the JobSet and Kueue webhooks on the stack's nodes",
            network=args.network,
            direction="INGRESS",
            source_ranges=[args.control_plane_range],
            target_tags=node_tags(cfg),
            allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=[str(p) for p in ports])],
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"ports": list(ports)})
