"""Where a stack's runs live: the cluster's project, location and name, and the runs' namespace.

The stack's own cluster is regional, in `gcp:region`, named `StackConfig.gke_cluster_name`; an
existing cluster is the one `existingCluster` names by name and location, or only by a kubeconfig
context (its location and name are then not known to the stack).
"""

from __future__ import annotations

from core.links import RunPlace, run_links
from stack.config import StackConfig


def cluster_place(config: StackConfig) -> tuple[str, str]:
    """(location, cluster name) of the stack's cluster; ("", "") for an existing cluster named by context."""
    existing = config.existing
    if existing is None:
        return config.region, config.gke_cluster_name
    if existing.by_context:
        return "", ""
    return existing.location, existing.name


def run_place(config: StackConfig, run: str) -> RunPlace:
    location, cluster = cluster_place(config)
    return RunPlace(config.project, location, cluster, config.runs_namespace, run)


def stack_run_links(config: StackConfig) -> dict[str, dict[str, str]]:
    """Each run's console and logs links, by run name."""
    return {run.name: run_links(run_place(config, run.name)) for run in config.runs}
