"""The Kubernetes provider for the cluster, authenticated by gke-gcloud-auth-plugin."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s
import yaml


def kubeconfig(name: str, endpoint: str, ca_certificate: str | None) -> str:
    """A kubeconfig that gets short-lived tokens from gcloud, never a stored credential.

    The DNS-based endpoint serves a certificate from a public authority, so
    its kubeconfig carries no cluster CA (as `gcloud container clusters
    get-credentials --dns-endpoint` writes it); the IP endpoint's is the cluster's.
    https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl#install_plugin
    https://cloud.google.com/kubernetes-engine/docs/how-to/latest/network-isolation#dns-based_endpoint"""
    cluster = {"server": f"https://{endpoint}"}
    if ca_certificate is not None:
        cluster["certificate-authority-data"] = ca_certificate
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": cluster}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "current-context": name,
            "users": [
                {
                    "name": name,
                    "user": {
                        "exec": {
                            "apiVersion": "client.authentication.k8s.io/v1beta1",
                            "command": "gke-gcloud-auth-plugin",
                            "installHint": "gcloud components install gke-gcloud-auth-plugin",
                            "provideClusterInfo": True,
                        }
                    },
                }
            ],
        },
        sort_keys=False,
    )


@dataclass
class KubernetesAccessArgs:
    cluster_name: pulumi.Input[str]
    endpoint: pulumi.Input[str]
    ca_certificate: pulumi.Input[str]
    dns_endpoint: bool = False  # the endpoint is the DNS-based one (no cluster CA)


class KubernetesAccess(pulumi.ComponentResource):
    """Holds the provider every Kubernetes resource of the stack is declared with."""

    provider: k8s.Provider

    def __init__(self, name: str, args: KubernetesAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-finetune:platform:KubernetesAccess", name, None, opts)
        config = pulumi.Output.all(args.cluster_name, args.endpoint, args.ca_certificate).apply(
            lambda v: kubeconfig(v[0], v[1], None if args.dns_endpoint else v[2])
        )
        self.provider = k8s.Provider(
            name,
            kubeconfig=config,
            # Every object the stack declares is applied server-side.
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({})


def controller_release(
    name: str, release: str, chart: str, version: str, namespace: str, opts: pulumi.ResourceOptions,
    values: dict | None = None,
) -> k8s.helm.v3.Release:
    """A controller from its official Helm chart, awaited: its CRDs, controller and webhooks exist
    before anything that depends on the release is submitted (an atomic install rolls back on failure)."""
    return k8s.helm.v3.Release(
        name,
        name=release,
        chart=chart,
        version=version,
        namespace=namespace,
        create_namespace=True,
        skip_await=False,
        atomic=True,
        timeout=600,
        values=values,
        opts=opts,
    )
