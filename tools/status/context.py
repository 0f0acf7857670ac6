"""Which cluster `make status` reads: the stack's own, never whatever the kubeconfig's current context is.

- An existing cluster named by context: `existingCluster.context`, in `existingCluster.kubeconfig`
  (else KUBECONFIG or ~/.kube/config).
- An existing cluster named by name and location, or the stack's own cluster (its name
  `StackConfig.gke_cluster_name`, its location the region): the context `gcloud container clusters
  get-credentials` writes for it, `gke_<project>_<location>_<cluster>` (the Google Cloud SDK's
  googlecloudsdk/api_lib/container/util.py, `ClusterConfig.KUBECONTEXT_FORMAT =
  'gke_{project}_{zone}_{cluster}'`, its "zone" being the cluster's location, a region for a
  regional cluster), in KUBECONFIG or ~/.kube/config. The command that writes it is the one the stack exports as
  `getCredentials` (__main__.py), with `--dns-endpoint` where the stack reaches the DNS-based endpoint.
- `--context` names another one explicitly.

A context that is not in the kubeconfig is a configuration the user fixes (by running the command
this says), not something a retry fixes: status exits 78 with that command.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from tools.status.sources import ClusterUnreachable, kubeconfig_file


class ContextMissing(Exception):
    """The stack's context is not in the kubeconfig; the message says how to get it."""


@dataclass(frozen=True)
class StackContext:
    context: str
    kubeconfig: str  # the file; "" for KUBECONFIG or ~/.kube/config
    why: str  # in words: whose context it is
    fix: str  # what writes it, for the message when it is missing

    def describe(self) -> str:
        where = f" in {self.kubeconfig}" if self.kubeconfig else ""
        return f"context {self.context}{where} ({self.why})"


def gke_context(project: str, location: str, cluster: str) -> str:
    """The kubeconfig context `gcloud container clusters get-credentials` writes for a cluster."""
    return f"gke_{project}_{location}_{cluster}"


def get_credentials(project: str, location: str, cluster: str, dns_endpoint: bool) -> str:
    return (f"gcloud container clusters get-credentials {cluster} --location {location} --project {project}"
            + (" --dns-endpoint" if dns_endpoint else ""))


def stack_context(config, override: str | None = None) -> StackContext:
    """The context `make status` reads for the stack (the module's docstring)."""
    existing = config.existing
    if override:
        return StackContext(override, "", "--context", f"a context {override!r} in the kubeconfig")
    if existing is not None and existing.by_context:
        return StackContext(existing.context, existing.kubeconfig, "the stack's existingCluster.context",
                            f"a context {existing.context!r} in "
                            f"{existing.kubeconfig or 'KUBECONFIG or ~/.kube/config'} (existingCluster)")
    if existing is not None:
        name, location, dns = existing.name, existing.location, existing.dns_endpoint
        why = "the stack's existingCluster, as `gcloud container clusters get-credentials` names it"
    else:
        name, location, dns = config.gke_cluster_name, config.region, config.network.dns_endpoint
        why = "the stack's own cluster, as `gcloud container clusters get-credentials` names it"
    command = get_credentials(config.project, location, name, dns)
    return StackContext(gke_context(config.project, location, name), "", why, f"run `{command}`")


def _files(explicit: str) -> list[str]:
    """The files the Kubernetes client merges: the explicit one, else KUBECONFIG's list, else ~/.kube/config."""
    listed = [explicit] if explicit else [f for f in os.environ.get("KUBECONFIG", "").split(os.pathsep) if f]
    return [os.path.expanduser(f) for f in listed or ["~/.kube/config"]]


def check(stack: str, ctx: StackContext) -> None:
    """Raises ContextMissing unless the kubeconfig holds the context, ClusterUnreachable when the
    kubeconfig there cannot be read."""
    from kubernetes import config as kube_config  # pylint: disable=import-outside-toplevel

    files = _files(ctx.kubeconfig)
    names: set[str] = set()
    if any(Path(f).is_file() for f in files):
        try:
            contexts, _ = kube_config.list_kube_config_contexts(config_file=kubeconfig_file(ctx.kubeconfig))
            names = {c["name"] for c in contexts or ()}
        except (kube_config.ConfigException, OSError, ValueError, yaml.YAMLError, TypeError, KeyError,
                AttributeError) as err:  # a file the client can't read as a kubeconfig, whatever it holds
            raise ClusterUnreachable(f"no usable kubeconfig ({', '.join(files)}): {type(err).__name__}: {err}") \
                from None
    if ctx.context not in names:
        raise ContextMissing(f"stack {stack}: the kubeconfig ({', '.join(files)}) has no {ctx.describe()}; {ctx.fix}")
