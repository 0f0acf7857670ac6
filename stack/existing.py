"""A stack for a cluster that exists already: how to reach it, what it holds, and the rules of such a stack.

A team that gets a GKE cluster from a platform team may only deploy into it.
Such a stack sets `existingCluster` and describes its pools by their GKE node
pool names (`nodePool`, or `nodePools` for a multislice pool, one per slice);
the program then declares only what lives in the cluster (stack/config.py
`StackConfig.existing`, `__main__.py`). The keys that shape a cluster, its
network or its registry make no sense there and are refused when they differ
from their defaults, so a stack never silently ignores what it says.

`charts` (any stack) says where the JobSet and Kueue Helm charts come from:
the upstream OCI repositories (default), a local directory holding `jobset/`
and `kueue/` chart directories, or a mirror (`oci://...` or an `https://`
Helm repository) serving the same charts at the pinned versions.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, model_validator
from pydantic.alias_generators import to_camel

from core.syntax import DNS_1035_LABEL
from stack.controller_releases import ControllerReleases
from stack.models import Flag, PoolConfig, StackModel
from stack.problems import MISSING, Problem, raise_problems

DNS_1035_LABEL_RE = re.compile(DNS_1035_LABEL)
CONTROLLERS = ("install", "existing")
MIRROR_SCHEMES = ("oci://", "https://")


class ExistingCluster(StackModel):
    """`existingCluster`: a kubeconfig context, or the cluster's name and location (gcp:project)."""

    context: str = Field(default="", description="a kubeconfig context name")
    kubeconfig: str = Field(default="", description="the kubeconfig file; default: $KUBECONFIG or ~/.kube/config")
    name: str = Field(default="", description="the GKE cluster's name (with `location`)")
    location: str = Field(default="", description="the cluster's region or zone")
    # name + location: reach the control plane at its DNS-based endpoint (no cluster CA), as
    # `gcloud container clusters get-credentials --dns-endpoint` does; default: its IP endpoint.
    dns_endpoint: Flag = False
    controllers: Literal["install", "existing"] = Field(
        default="install", description="install: the stack installs JobSet (and Kueue); existing: they are installed")
    # How the platform team installed them (stack/controller_releases.py): the names the preview reads and
    # `make handoff` grants.
    controller_releases: ControllerReleases = ControllerReleases()
    bucket_grants: Flag = Field(default=False, description="declare the bucket grants to the workload identities")

    @model_validator(mode="after")
    def _one_way_in(self) -> ExistingCluster:
        raise_problems(access_problems(self) + releases_problems(self))
        return self

    @property
    def by_context(self) -> bool:
        return bool(self.context)


def access_problems(e: ExistingCluster) -> list[Problem]:
    by_context, by_name = bool(e.context), bool(e.name or e.location)
    allowed = "either {context (, kubeconfig)} or {name, location}"
    if by_context and by_name:
        return [Problem("", {"context": e.context, "name": e.name, "location": e.location},
                        "names the cluster twice", allowed)]
    if not (by_context or by_name):
        return [Problem("", MISSING, "and the cluster is named neither by context nor by name and location", allowed)]
    problems = []
    if by_name and not e.name:
        problems.append(Problem("name", MISSING, "and `location` is set", "the cluster's name"))
    if by_name and not e.location:
        problems.append(Problem("location", MISSING, "and `name` is set", "the cluster's region or zone"))
    if e.dns_endpoint and by_context:
        problems.append(Problem("dnsEndpoint", True, "with `context`", "dnsEndpoint only with {name, location} "
                                "(a context's endpoint is its kubeconfig's)"))
    if e.kubeconfig and not by_context:
        problems.append(Problem("kubeconfig", e.kubeconfig, "without `context`",
                                "a kubeconfig file only with `context`"))
    return problems


def releases_problems(e: ExistingCluster) -> list[Problem]:
    """`controllerReleases` describes controllers the platform team installed: with `install` the stack's own
    releases are the defaults, and another value would say something the stack ignores."""
    if e.controllers == "existing" or e.controller_releases.is_default:
        return []
    return [Problem("controllerReleases", e.controller_releases.model_dump(by_alias=True), "with controllers: install",
                    "no controllerReleases (the stack installs its own releases, jobset-system/jobset and "
                    "kueue-system/kueue), or controllers: existing")]


class Charts(StackModel):
    """`charts`: where the controllers' Helm charts come from; empty: their upstream repositories."""

    dir: str | None = Field(default=None, description="a local directory holding jobset/ and kueue/ chart directories")
    repository: str | None = Field(default=None, description="an oci:// or https:// mirror of the charts")

    @model_validator(mode="after")
    def _one_source(self) -> Charts:
        problems = []
        if self.dir and self.repository:
            problems.append(Problem("", {"dir": self.dir, "repository": self.repository}, "names two chart sources",
                                    "{dir} or {repository}, or neither (the upstream repositories)"))
        if self.repository and not self.repository.startswith(MIRROR_SCHEMES):
            problems.append(Problem("repository", self.repository, "is not a chart repository address",
                                    "oci://<registry>/<path> or https://<helm repository>"))
        raise_problems(problems)
        return self


# Fields that shape what a platform cluster is; an existing cluster's are the platform team's.
CLUSTER_FIELDS = ("cluster_name", "release_channel", "deletion_protection", "system_machine_type",
                  "system_node_count", "zones", "registry_name", "image_builder", "network")


def existing_stack_problems(config: Any) -> list[Problem]:
    """What a stack for an existing cluster (a StackConfig) may not say: cluster keys that differ from their
    defaults, pools it doesn't describe, images it would have to build, no bucket name."""
    problems = []
    for field in CLUSTER_FIELDS:
        value, default = getattr(config, field), type(config).model_fields[field].get_default(call_default_factory=True)
        if value != default:
            key = to_camel(field)
            shown = value.model_dump(by_alias=True) if hasattr(value, "model_dump") else value
            shown = list(shown) if isinstance(shown, tuple) else shown
            problems.append(Problem(key, shown, "describes a cluster the stack would declare, and `existingCluster` "
                                    "is set", f"no {key}: the platform team's cluster has its own"))
    for i, pool in enumerate(config.pools):
        problems += [p.under(f"pools[{i}]") for p in node_pool_problems(pool)]
    pinned = config.images.by_trainer()
    problems += [
        Problem(f"images.{trainer}", MISSING, "and images can't be built for an existing cluster without "
                "imageBuild.registry (the stack declares no registry)",
                "<registry>/<path>@sha256:<64 hex>, an image the cluster's nodes can pull; or imageBuild.registry, "
                "where `pulumi up` pushes the images it builds")
        for trainer in config.needed_trainers() if trainer not in pinned and not config.image_build.registry
    ]
    if not config.namespace:
        problems.append(Problem("namespace", MISSING, "and the stack uses an existing cluster, which other teams and "
                                "stacks may share: the stack names the namespace it deploys into",
                                "the namespace the platform team gave the stack (it must exist), or a new one with "
                                "createNamespace: true"))
    if not config.bucket_name:
        problems.append(Problem("bucketName", MISSING, "and the stack uses an existing cluster: the bucket exists "
                                "and is not declared, so it has no default name", "the data bucket's name"))
    return problems


def node_pool_problems(pool: PoolConfig) -> list[Problem]:
    """A pool of an existing cluster is described by its GKE node pool (one per slice), never declared."""
    names = pool.described_node_pools()
    if pool.zones:
        return [Problem("zones", list(pool.zones), "of a pool of an existing cluster",
                        "none (the node pool's locations are the platform team's)")]
    if not names:
        key = "nodePool" if pool.slices == 1 else "nodePools"
        return [Problem(key, MISSING, f"on pool {pool.name!r} of an existing cluster",
                        "the GKE node pool's name" if pool.slices == 1 else f"{pool.slices} GKE node pool names, "
                        "one per slice")]
    if len(names) != pool.slices:
        return [Problem("nodePools", list(names), f"for {pool.slices} slice(s) of pool {pool.name!r}",
                        f"exactly {pool.slices} GKE node pool name(s), one per slice")]
    bad = [n for n in names if not DNS_1035_LABEL_RE.fullmatch(n) or len(n) > 40]
    return [Problem("nodePool", n, "is not a GKE node pool name", "a DNS label of at most 40 characters")
            for n in bad]


def platform_pool_problems(pools: tuple[PoolConfig, ...]) -> list[Problem]:
    """`nodePool(s)` only describe an existing cluster's pools: a platform pool is declared by the stack."""
    return [
        Problem(f"pools[{i}].{'nodePool' if p.node_pool else 'nodePools'}", p.node_pool or list(p.node_pools),
                "without `existingCluster`", "no nodePool: the stack declares its pools' GKE node pools")
        for i, p in enumerate(pools) if p.node_pool or p.node_pools
    ]

