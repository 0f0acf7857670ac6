"""What a stack puts into its cluster, exactly as the program declares it, in the order Pulumi applies it.

The whole program runs under the SDK's mocks (tools/offline.py, as `make plan`
and the tests run it); from what it declares this takes:

- every Kubernetes object (`kubernetes:<group/version>:<Kind>`): its inputs are
  the manifest the Kubernetes provider applies;
- every Helm release: chart, version, namespace and values, to render the
  chart as Helm would (controllers.py);
- the node pools' inputs and the cluster's name and location (nodes.py).

The order is the dependency order of the declared resources: an object comes
after every object it depends on through any chain of declared resources
(`dependsOn`), as the engine would wait for them; ties keep the
program's order.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from pulumi.runtime import rpc

from core.names import RUNS_NAMESPACE
from stack import reader
from tools.offline import ROOT, Declared, Deployment, run_stack

RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"
# Kinds only GKE serves: no module publishes their CRDs, so this control plane can't take them.
GKE_ONLY_KINDS = {("cloud.google.com/v1", "ComputeClass"): "GKE's own API (no published CRD): not applied here"}
NODE_POOL_TYPE = "gcp:container/nodePool:NodePool"
CLUSTER_TYPE = "gcp:container/cluster:Cluster"


@dataclass(frozen=True)
class Applied:
    """One step of a stack's in-cluster install: an object, or a Helm release."""

    name: str  # the Pulumi resource name
    manifest: dict | None = None
    release: dict | None = None
    after: tuple[str, ...] = ()  # the Pulumi names of the steps it waits for


@dataclass
class StackObjects:
    stack: str
    cluster: str
    region: str
    autopilot: bool
    config: Any = None  # the stack's StackConfig (stack/reader.py)
    node_pools: list[dict] = field(default_factory=list)
    steps: list[Applied] = field(default_factory=list)
    runs_namespace: str = RUNS_NAMESPACE

    def manifests(self, kind: str | None = None) -> list[dict]:
        return [s.manifest for s in self.steps if s.manifest and (kind is None or s.manifest["kind"] == kind)]

    def applicable(self) -> list[dict]:
        """The manifests this control plane can take (all but GKE_ONLY_KINDS)."""
        return [m for m in self.manifests() if gke_only(m) is None]


def gke_only(manifest: dict) -> str | None:
    """Why a manifest can't be applied here, or None."""
    return GKE_ONLY_KINDS.get((manifest["apiVersion"], manifest["kind"]))


def _config(stack: str, root: Path, overrides: dict | None):
    """The StackConfig the program saw: the stack file with the overrides applied, unvalidated by admission."""
    if not overrides:
        return reader.load_files(stack, root)
    values = reader.file_values(stack, root)
    values.update(overrides)
    return reader.validate(reader.model_values(values, stack))


def _unwrap_secrets(value: Any) -> Any:
    """The recorded inputs with every Pulumi secret replaced by its value: the provider sends the
    value itself (the wire form marks a secret with the SDK's signature key, pulumi/runtime/rpc.py)."""
    if isinstance(value, dict):
        if value.get(rpc._special_sig_key) == rpc._special_secret_sig:  # noqa: SLF001
            return _unwrap_secrets(value["value"])
        return {k: _unwrap_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap_secrets(v) for v in value]
    return value


def declared_releases(stack: str, root: Path) -> list[dict]:
    """The Helm releases the stack file `Pulumi.<stack>.yaml` of `root` declares, their inputs as the provider
    gets them (any stack, one for an existing cluster too, which `stack_objects` doesn't take)."""
    deployment = run_stack(stack, root=root)
    return [_unwrap_secrets(dict(r.inputs)) for r in deployment.resources if r.type == RELEASE_TYPE]


def _is_kubernetes_object(r: Declared) -> bool:
    return r.custom and r.type.startswith("kubernetes:") and r.type != RELEASE_TYPE \
        and not r.type.startswith("pulumi:providers:")


def _closure(deployment: Deployment) -> dict[str, set[str]]:
    """URN -> every URN it waits for, transitively. The SDK has already expanded a
    `depends_on` naming a component into that component's children."""
    direct = {r.urn: set(r.dependencies) for r in deployment.resources}
    memo: dict[str, set[str]] = {}

    def reach(urn: str) -> set[str]:
        if urn not in memo:
            memo[urn] = set()  # a cycle, if any, is reported by _ordered
            out: set[str] = set()
            for dep in direct.get(urn, ()):
                out |= {dep} | reach(dep)
            memo[urn] = out
        return memo[urn]

    return {r.urn: reach(r.urn) for r in deployment.resources}


def _ordered(steps: list[tuple[Declared, Applied]], closure: dict[str, set[str]]) -> list[Applied]:
    urns = {d.urn for d, _ in steps}
    waits = {d.urn: closure[d.urn] & urns for d, _ in steps}
    done: list[Applied] = []
    placed: set[str] = set()
    pending = list(steps)
    while pending:
        ready = [(d, a) for d, a in pending if waits[d.urn] <= placed]
        if not ready:
            raise RuntimeError(f"e2e: a dependency cycle among {[d.name for d, _ in pending]}")
        d, a = ready[0]
        pending.remove((d, a))
        placed.add(d.urn)
        names = tuple(x.name for x, _ in steps if x.urn in waits[d.urn])
        done.append(Applied(a.name, a.manifest, a.release, names))
    return done


@functools.cache
def stack_objects(stack: str, root: Path = ROOT, admission: bool = True, overrides_json: str = "") -> StackObjects:
    """The stack's in-cluster steps. admission=False runs the program without admission/
    (its `admit` passes the config through), so only the real control plane judges.
    `overrides_json`: stack keys changed as run_stack's overrides (JSON, so the call is cached).
    Cached per process: the program runs once per stack; callers copy what they change."""
    overrides = json.loads(overrides_json) if overrides_json else None
    if admission:
        deployment = run_stack(stack, root=root, overrides=overrides)
    else:
        with mock.patch("admission.check.admit", side_effect=lambda config: config):
            deployment = run_stack(stack, root=root, overrides=overrides)
    cluster = deployment.of_type(CLUSTER_TYPE)[0].inputs
    config = _config(stack, root, overrides)
    steps = []
    for r in deployment.resources:
        if r.type == RELEASE_TYPE:
            steps.append((r, Applied(r.name, release=_unwrap_secrets(dict(r.inputs)))))
        elif _is_kubernetes_object(r):
            steps.append((r, Applied(r.name, manifest=_unwrap_secrets(dict(r.inputs)))))
    return StackObjects(
        stack=stack, cluster=cluster["name"], region=cluster["location"],
        autopilot=bool(cluster.get("enableAutopilot")), config=config, runs_namespace=config.runs_namespace,
        node_pools=[dict(p.inputs) for p in deployment.of_type(NODE_POOL_TYPE)],
        steps=_ordered(steps, _closure(deployment)),
    )
