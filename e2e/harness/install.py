"""A stack onto the control plane: its nodes, then its in-cluster steps in dependency order.

Awaited as `pulumi up` awaits them: a Helm release until its controller is
Available (controllers.py), a batch/v1 Job until `Complete` (the provider's
Job await; a `Failed` Job fails the install with the Job's message), every
other object once the API server has accepted it. Runs carry
`pulumi.com/skipAwait` and are submitted and left running.
"""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import yaml

from e2e.harness import controllers, fuse_sidecar
from e2e.harness.secrets_addon import secret_provider_class_crd
from e2e.harness.apply import apply_all, apply_one
from e2e.harness.cluster import ControlPlane
from e2e.harness.kube import Kube, wait_for
from e2e.harness.nodes import PoolNodes, stack_nodes
from e2e.harness.autopilot import autopilot_node_pools
from e2e.harness.stack_objects import StackObjects, gke_only
from e2e.harness.tools import ROOT

NODE_READY_TIMEOUT = 90.0
# Nodes are registered CREATE_WORKERS at a time; the Ready wait allows NODES_PER_SECOND on top of
# NODE_READY_TIMEOUT (kwok marks thousands Ready in the scale benchmark, on a loaded machine).
CREATE_WORKERS = 8
NODES_PER_SECOND = 4.0
JOB_TIMEOUT = 120.0


@dataclass
class Installed:
    stack: str
    pools: list[PoolNodes]
    applied: list[str] = field(default_factory=list)  # "Kind namespace/name" per object accepted
    left_out: list[str] = field(default_factory=list)
    jobs_completed: list[str] = field(default_factory=list)

    def nodes_of(self, pool: str) -> list[str]:
        return [n["metadata"]["name"] for p in self.pools if p.pool == pool for n in p.nodes]


def _ready(node: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in node.get("status", {}).get("conditions") or [])


def create_nodes(kube: Kube, pools: list[PoolNodes]) -> None:
    """Every node of every pool that GKE keeps nodes in (a queued pool's come with a ProvisioningRequest).
    Created a few at a time (thousands for the scale benchmark), awaited Ready with one list per poll."""
    nodes = [node for pool in pools if not pool.queued for node in pool.nodes]
    existing = {n["metadata"]["name"] for n in kube.list("v1", "Node")}
    # A node's status is kept on create (the kubelet registers its node this way).
    with ThreadPoolExecutor(max_workers=CREATE_WORKERS) as workers:
        list(workers.map(kube.create, [n for n in nodes if n["metadata"]["name"] not in existing]))
    names = {n["metadata"]["name"] for n in nodes}

    def all_ready() -> bool:
        return names <= {n["metadata"]["name"] for n in kube.list("v1", "Node") if _ready(n)}

    wait_for(f"{len(names)} nodes Ready", all_ready, NODE_READY_TIMEOUT + len(names) / NODES_PER_SECOND,
             interval=max(0.5, len(names) / 1000))


def job_outcome(kube: Kube, name: str, namespace: str) -> str | None:
    """'Complete', 'Failed: <message>', or None while the Job runs."""
    job = kube.get("batch/v1", "Job", name, namespace)
    for c in job.get("status", {}).get("conditions") or []:
        if c["type"] in ("Complete", "Failed") and c["status"] == "True":
            return c["type"] if c["type"] == "Complete" else f"Failed: {c.get('reason')}: {c.get('message')}"
    return None


def _await_job(kube: Kube, manifest: dict) -> str:
    name, ns = manifest["metadata"]["name"], manifest["metadata"].get("namespace", "default")
    outcome = wait_for(f"Job {ns}/{name} to finish", lambda: job_outcome(kube, name, ns), JOB_TIMEOUT,
                       explain=lambda: _job_pods(kube, name, ns))
    if outcome != "Complete":
        raise RuntimeError(f"e2e: Job {ns}/{name} {outcome}")
    return f"{ns}/{name}"


def _job_pods(kube: Kube, name: str, namespace: str) -> str:
    pods = kube.list("v1", "Pod", namespace, labels=f"batch.kubernetes.io/job-name={name}")
    return "; ".join(f"{p['metadata']['name']} {p['status'].get('phase')} "
                     f"{[c.get('message') for c in p['status'].get('conditions', []) if c.get('message')]}"
                     for p in pods) or "no pods"


def start_provisioner(cp: ControlPlane, pools: list[PoolNodes]) -> None:
    """GKE's provisioning of the queued pools' nodes (provisioner.py), for as long as the control plane lives."""
    queued = [{"pool": p.pool, "nodes": list(p.nodes)} for p in pools if p.queued]
    if not queued:
        return
    settings = {"server": cp.server, "token": cp.pki.tokens["admin"], "ca": str(cp.pki.ca_cert), "pools": queued}
    (cp.state / "provisioner.json").write_text(json.dumps(settings))
    cp.supervisor.start("provisioner", [sys.executable, "-m", "e2e.harness.provisioner", str(cp.state)], cwd=ROOT)


def install_stack(cp: ControlPlane, kube: Kube, objects: StackObjects, platform_only: bool = False) -> Installed:
    """The stack's nodes and in-cluster steps. `platform_only`: what a platform team provides an
    existing-cluster stack with, the nodes and the JobSet and Kueue controllers, nothing else."""
    pools = autopilot_node_pools(objects) if objects.autopilot else objects.node_pools
    installed = Installed(objects.stack, stack_nodes(pools, objects.cluster, objects.region))
    # GKE's own CRDs first: the cluster has them before anything of the stack.
    apply_all(kube, [*(yaml.safe_load(p.read_text()) for p in cp.tools.gke_crds()), secret_provider_class_crd()])
    fuse_sidecar.start(cp, kube)  # GKE's own webhook: there before any pod of the stack
    create_nodes(kube, installed.pools)
    start_provisioner(cp, installed.pools)
    for step in objects.steps:
        if step.release is not None:
            release = controllers.install(cp, kube, step.release)
            installed.applied += [f"{o['kind']} {o['metadata'].get('namespace', '')}/{o['metadata']['name']}"
                                  for o in release.objects]
            installed.left_out += release.left_out
            continue
        if platform_only:
            continue
        manifest = step.manifest
        if gke_only(manifest):
            installed.left_out.append(f"{manifest['kind']}/{manifest['metadata']['name']}: {gke_only(manifest)}")
            continue
        apply_one(kube, manifest)
        installed.applied.append(f"{manifest['kind']} {manifest['metadata'].get('namespace', '')}/"
                                 f"{manifest['metadata']['name']}")
        if manifest["kind"] == "Job" and manifest["apiVersion"] == "batch/v1":
            installed.jobs_completed.append(_await_job(kube, manifest))
    return installed
