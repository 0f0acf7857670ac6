"""The names a stack asks for that no other stack may ask for: Google Cloud's unique names and a shared
cluster's or bucket's places.

Google Cloud refuses a second resource of the same name in its scope with a
409 in the middle of `pulumi up`, after other resources of the stack exist;
and two stacks in one namespace of one cluster, or writing the same prefix of
one bucket, would take over each other's objects. Every bucket prefix carries
the stack (core/names.py), so two stacks of a checkout may name runs and
datasets alike on one bucket: their prefixes differ. `make plan` compares the
stack it plans with every other stack file of the checkout and refuses any
name two of them would claim (tools/plan/collect.py); the components name their
resources with the same functions (core/ids.py), and a test holds that every
name the program gives a Google Cloud resource is one listed here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from core.ids import network_name, service_account_id, subnetwork_name, webhook_firewall_name
from stack.config import StackConfig


@dataclass(frozen=True, order=True)
class ClaimedName:
    kind: str  # what is named, e.g. "GKE cluster"
    scope: str  # where the name must be unique, e.g. "project my-project-id, location us-east5"
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name!r} ({self.scope})"


def _google_cloud(cfg: StackConfig) -> list[ClaimedName]:
    project, region = f"project {cfg.project}", f"project {cfg.project}, region {cfg.region}"
    names = [
        ClaimedName("GKE cluster", f"project {cfg.project}, location {cfg.region}", cfg.gke_cluster_name),
        ClaimedName("Artifact Registry repository", region, cfg.registry_id),
        ClaimedName("service account", project, service_account_id(cfg.stack, "nodes")),
        ClaimedName("bucket", "global", cfg.data_bucket),
    ]
    if cfg.network.creates:
        names += [ClaimedName("VPC network", project, network_name(cfg.stack)),
                  ClaimedName("subnetwork", region, subnetwork_name(cfg.stack))]
    if cfg.network.private_nodes:
        names.append(ClaimedName("firewall rule", project, webhook_firewall_name(cfg.stack)))
    return names


def _cluster_of(cfg: StackConfig) -> str:
    existing = cfg.existing
    if existing is None:
        return f"cluster {cfg.project}/{cfg.region}/{cfg.gke_cluster_name}"
    if existing.by_context:
        return f"cluster of kubeconfig context {existing.context}"
    return f"cluster {cfg.project}/{existing.location}/{existing.name}"


def claimed_names(cfg: StackConfig) -> list[ClaimedName]:
    """Every name the stack claims: Google Cloud's (own cluster), its namespace in its cluster, and the
    bucket prefixes its runs and staging Jobs write."""
    names = [] if cfg.existing else _google_cloud(cfg)
    names.append(ClaimedName("namespace", _cluster_of(cfg), cfg.runs_namespace))
    bucket, layout = f"bucket {cfg.data_bucket}", cfg.bucket_layout
    for run in cfg.runs:
        names += [ClaimedName("bucket prefix", bucket, f"{prefix}/") for prefix in layout.run(run.name).writes]
    names += [ClaimedName("bucket prefix", bucket, f"{prefix}/") for prefix in cfg.export_prefixes().values()]
    names += [ClaimedName("bucket prefix", bucket, f"{layout.dataset(d.name)}/") for d in cfg.datasets]
    return names


def collision_problems(stack: str, configs: Mapping[str, StackConfig]) -> list[str]:
    """One line per name `stack` claims that another stack of `configs` claims too."""
    mine = set(claimed_names(configs[stack]))
    problems = []
    for other, cfg in sorted(configs.items()):
        if other == stack:
            continue
        for name in sorted(mine & set(claimed_names(cfg))):
            problems.append(f"Pulumi.{stack}.yaml and Pulumi.{other}.yaml both claim {name}: one would fail or take "
                            f"over the other's; allowed: a name of the stack's own (see the stack's keys "
                            f"clusterName, registryName, bucketName and namespace)")
    return problems
