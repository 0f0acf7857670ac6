"""The Kubernetes provider for the cluster, authenticated by gke-gcloud-auth-plugin."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
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


def cluster_identifier(project: str, location: str, name: str) -> str:
    """A GKE cluster's stable identity: its resource name, which no endpoint change (an IP rotation, the
    DNS-based endpoint switched on or off) alters."""
    return f"projects/{project}/locations/{location}/clusters/{name}"


@dataclass
class KubernetesAccessArgs:
    cluster_name: pulumi.Input[str]
    endpoint: pulumi.Input[str]
    ca_certificate: pulumi.Input[str]
    # The provider's identity (`cluster_identifier`): the cluster's project, location and name.
    identifier: str
    dns_endpoint: bool = False  # the endpoint is the DNS-based one (no cluster CA)


# "The provider will _only_ be replaced when `clusterIdentifier` changes": without it, any change of the
# kubeconfig (a new endpoint address, the CA after a credential rotation, a teammate's kubeconfig) replaces
# the provider and so every object of the stack, running JobSets included (@pulumi/kubernetes provider.d.ts,
# https://app.unpkg.com/@pulumi/kubernetes@4.24.0/files/provider.d.ts, read 2026-12-02).


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
            cluster_identifier=args.identifier,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({})


@dataclass
class KubeconfigAccessArgs:
    """An existing cluster reached through a kubeconfig context, as kubectl reaches it."""

    context: str
    # The kubeconfig file; None: the provider's default, $KUBECONFIG or ~/.kube/config
    # ("If this is set, this config will be used instead of $KUBECONFIG":
    # https://pkg.go.dev/github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/config, read 2026-12-02).
    kubeconfig: str | None = None


class ExistingClusterAccess(pulumi.ComponentResource):
    """The provider for a cluster the stack does not declare: a kubeconfig context, or (KubernetesAccessArgs)
    the cluster's endpoint and CA as Google Cloud reports them, with gke-gcloud-auth-plugin credentials.
    `checked`, given, passes the built kubeconfig on once the cluster behind it has been checked."""

    provider: k8s.Provider

    def __init__(self, name: str, args: KubeconfigAccessArgs | KubernetesAccessArgs,
                 opts: pulumi.ResourceOptions | None = None,
                 checked: Callable[[pulumi.Output[str]], pulumi.Output[str]] | None = None):
        super().__init__("gke-finetune:platform:ExistingClusterAccess", name, None, opts)
        if isinstance(args, KubeconfigAccessArgs):
            config: pulumi.Input[str] | None = os.path.expanduser(args.kubeconfig) if args.kubeconfig else None
            context: str | None = args.context
            identifier: pulumi.Input[str] = args.context
        else:
            config = pulumi.Output.all(args.cluster_name, args.endpoint, args.ca_certificate).apply(
                lambda v: kubeconfig(v[0], v[1], None if args.dns_endpoint else v[2]))
            config = checked(config) if checked else config
            context, identifier = None, args.identifier
        self.provider = k8s.Provider(
            name, kubeconfig=config, context=context, enable_server_side_apply=True,
            # Replaced only when the cluster changes, not when a teammate's kubeconfig or the endpoint does
            # (see KubernetesAccess).
            cluster_identifier=identifier,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"context": context})


def existing_cluster_endpoint(name: str, location: str, project: str, dns_endpoint: bool = False,
                              opts: pulumi.InvokeOutputOptions | None = None) -> KubernetesAccessArgs:
    """An existing cluster's endpoint and CA, read from GKE (the one read of a Google Cloud API such a
    stack makes): the same kubeconfig `gcloud container clusters get-credentials` writes (with
    `--dns-endpoint`: the DNS-based endpoint, whose certificate needs no cluster CA)."""
    cluster = gcp.container.get_cluster_output(name=name, location=location, project=project, opts=opts)
    endpoint = cluster.control_plane_endpoints_configs.apply(
        lambda configs: configs[0].dns_endpoint_configs[0].endpoint) if dns_endpoint else cluster.endpoint
    return KubernetesAccessArgs(
        cluster_name=name,
        endpoint=endpoint,
        ca_certificate=cluster.master_auths.apply(lambda auths: auths[0].cluster_ca_certificate),
        identifier=cluster_identifier(project, location, name),
        dns_endpoint=dns_endpoint,
    )


def controller_release(
    name: str, release: str, source: dict, namespace: str, opts: pulumi.ResourceOptions,
    values: dict | None = None,
) -> k8s.helm.v3.Release:
    """A controller from its official Helm chart (`source`: manifests/controllers.py `chart_source`), awaited:
    its CRDs, controller and webhooks exist before anything that depends on the release is submitted (an
    atomic install rolls back on failure).

    Owned once: the release is retained on delete, so neither `pulumi destroy` nor a stack that stops
    needing the controller uninstalls it. Other stacks on the cluster use it (`controllers: existing`), and
    an uninstall takes Kueue's CRDs with it (its chart keeps them in templates/, which Helm deletes, unlike
    JobSet's crds/), and with the CRDs every team's ClusterQueues, LocalQueues and Workloads. Pulumi then
    drops the release from the state without calling the provider's Delete
    (https://www.pulumi.com/docs/iac/concepts/resources/options/retainondelete/); a platform team removes
    the controllers on purpose (docs/existing-clusters.md, "Controllers are owned once")."""
    repository = source.get("repository_opts")
    return k8s.helm.v3.Release(
        name,
        name=release,
        chart=source["chart"],
        version=source.get("version"),
        repository_opts=k8s.helm.v3.RepositoryOptsArgs(**repository) if repository else None,
        namespace=namespace,
        create_namespace=True,
        skip_await=False,
        atomic=True,
        timeout=600,
        values=values,
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(retain_on_delete=True)),
    )
