"""One case of the scale benchmark (bench/scale.py): a stack declared, installed, its run applied and timed."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from bench.scale_phases import phases
from bench.scale_placement import node_selector_strategy
from bench.scale_sample import Sampler, load_average
from bench.scale_watch import JOB_INDEX_LABEL, PodWatch
from core.catalog import NODEPOOL_LABEL, TPU_TOPOLOGY_LABEL
from e2e.harness.faults import ready
from e2e.harness.install import install_stack
from e2e.harness.observe import JOBSET_NAME_LABEL, expected_pods
from e2e.harness.session import control_plane
from e2e.harness.stack_objects import StackObjects, stack_objects
from e2e.harness.tools import CONTROL_PLANE_TOOLS

STACK = "tpu-multislice"  # the shipped multislice stack, its pool and run overridden
POOL = "v6e-16x16"
RUN = "multislice"
TOPOLOGY = "16x16"

IDLE_SECONDS = 10.0  # sampled before the run, for the programs' background (leases, heartbeats)
LIFETIME = 3600
LEASE_SECONDS = 600  # Case.extra_args says why
MONITOR_GRACE_SECONDS = 900


@dataclass(frozen=True)
class Case:
    slices: int
    strategy: str  # "affinity" | "node-selector"
    kueue: bool
    rep: int = 0
    api_qps: int = 0  # the controller-manager's and scheduler's client rate; 0: their defaults (20, 50)

    def label(self) -> str:
        return (f"{self.slices}-slices-{self.strategy}-{'kueue' if self.kueue else 'direct'}"
                f"-qps{self.api_qps or 'default'}-{self.rep}")

    def extra_args(self) -> dict[str, list[str]]:
        """The client rates Kubernetes' own 5,000-node validation ran the controller-manager and the
        scheduler with (`--kube-api-qps=100 --kube-api-burst=100`, sig-release's scalability
        validation report for release 1.9); the defaults are 20 (burst 30) and 50 (burst 100)
        (k8s.io/kubernetes v1.35.4 pkg/controller/apis/config/v1alpha1/defaults.go,
        pkg/scheduler/apis/config/v1/defaults.go)."""
        # kwok logs every lease it renews at INFO (400 lines a second at 4,096 nodes). Its leases are
        # renewed every 150 s instead of a kubelet's 10 s (kwok renews at a quarter of the duration),
        # and the node lifecycle controller waits 900 s instead of 50 s for one: on 2 shared cores,
        # 4,096 kubelets' 410 lease writes a second left a quarter of the nodes NotReady before the
        # run began (tainted, so unschedulable), which a GKE control plane sized for them does not.
        kwok = ["--v=WARN", f"--node-lease-duration-seconds={LEASE_SECONDS}"]
        kcm = [f"--node-monitor-grace-period={MONITOR_GRACE_SECONDS}s"]
        if self.api_qps:
            rate = [f"--kube-api-qps={self.api_qps}", f"--kube-api-burst={self.api_qps}"]
            return {"kwok": kwok, "kube-controller-manager": kcm + rate, "kube-scheduler": rate}
        return {"kwok": kwok, "kube-controller-manager": kcm}


def overrides(slices: int, kueue: bool) -> dict:
    """The stack keys a user changes: the pool's shape and slices, and the run (a priority: through Kueue)."""
    pool = {"name": POOL, "accelerator": "tpu-v6e", "topology": TOPOLOGY, "machineType": "ct6e-standard-4t",
            "slices": slices, "capacity": "spot"}
    run = {"name": RUN, "trainer": "gemma-jax", "pool": POOL, "data": "tinystories",
           "args": ["--maxlen", "256", "--batch_size", "64"]}
    if kueue:
        run["priority"] = "normal"
    return {"gke-finetune:pools": [pool], "gke-finetune:runs": [run]}


def declare(case: Case) -> StackObjects:
    """The program's objects for the case; with the node-selector strategy given to them (bench/scale_placement.py)."""
    objects = stack_objects(STACK, overrides_json=json.dumps(overrides(case.slices, case.kueue)))
    if case.strategy == "node-selector":
        objects = node_selector_strategy(objects, RUN, POOL, case.slices)
    return objects


def _without_run(objects: StackObjects) -> tuple[StackObjects, dict]:
    run = next(s.manifest for s in objects.steps if s.manifest and s.manifest["kind"] == "JobSet")
    steps = [s for s in objects.steps if s.manifest is not run]
    return dataclasses.replace(objects, steps=steps), run


def exclusive(pods: list[dict], nodes: dict[str, dict], slices: int) -> str:
    """'yes' when each slice's pods share one node pool of the topology and no pool holds two
    slices; else what broke."""
    pools_of = defaultdict(set)
    for pod in pods:
        node = nodes.get(pod["spec"].get("nodeName") or "")
        if node is None:
            return f"pod {pod['metadata']['name']} unbound"
        if node["metadata"]["labels"].get(TPU_TOPOLOGY_LABEL) != TOPOLOGY:
            return f"pod {pod['metadata']['name']} on a node of another topology"
        pools_of[pod["metadata"]["labels"][JOB_INDEX_LABEL]].add(node["metadata"]["labels"][NODEPOOL_LABEL])
    if len(pools_of) != slices:
        return f"{len(pools_of)} slices have pods, of {slices}"
    split = {j: p for j, p in pools_of.items() if len(p) != 1}
    if split:
        return f"slices over several node pools: {split}"
    taken = [next(iter(p)) for p in pools_of.values()]
    return "yes" if len(set(taken)) == len(taken) else "a node pool holds two slices"


def _wait(watch: PodWatch, what: str, want: int, deadline: float) -> float | None:
    while time.monotonic() < deadline:
        if watch.count(what) >= want:
            return time.monotonic()
        time.sleep(0.2)
    return None


def _usage(sampler_usage: dict, idle: dict, seconds: float) -> dict:
    return {name: {"peak_cores": round(u.peak_cores, 2), "cpu_s": round(u.cpu_s, 1),
                   "net_cpu_s": round(u.cpu_s - idle[name].cpu_s / IDLE_SECONDS * seconds, 1),
                   "idle_cores": round(idle[name].cpu_s / IDLE_SECONDS, 3), "peak_rss_mib": round(u.peak_rss_mib)}
            for name, u in sampler_usage.items()}


def timeline(times: dict, t0: float, step: float = 2.0) -> list[list]:
    """[seconds, pods created, pods bound] every `step` seconds from the JobSet's creation."""
    created = sorted(t.created - t0 for t in times.values() if t.created)
    bound = sorted(t.bound - t0 for t in times.values() if t.bound)
    end = max(created[-1:] + bound[-1:] + [0.0])
    out, at = [], 0.0
    while at < end + step:
        out.append([at, sum(1 for c in created if c <= at), sum(1 for b in bound if b <= at)])
        at += step
    return out


def _flag(argv: list[str], name: str) -> str | None:
    return next((a.split("=", 1)[1] for a in argv if a.startswith(f"--{name}=")), None)


def client_rates(pids: dict[str, int]) -> dict[str, dict]:
    """Each program's API client rate as it runs: the controller-manager's and scheduler's
    --kube-api-qps/--kube-api-burst flags (their defaults when absent: 20/30 and 50/100, k8s.io/kubernetes
    v1.35.4 pkg/controller/apis/config/v1alpha1/defaults.go, pkg/scheduler/apis/config/v1/defaults.go),
    the managers' `clientConnection` in the --config file their chart's ConfigMap gives them."""
    import yaml  # pylint: disable=import-outside-toplevel

    defaults = {"kube-controller-manager": ("20", "30"), "kube-scheduler": ("50", "100")}
    rates = {}
    for name, pid in pids.items():
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        if name in defaults:
            qps, burst = _flag(argv, "kube-api-qps"), _flag(argv, "kube-api-burst")
            rates[name] = {"qps": float(qps or defaults[name][0]), "burst": int(burst or defaults[name][1]),
                           "set": qps is not None}
        elif name.endswith("-manager") and _flag(argv, "config"):
            docs = [d for d in yaml.safe_load_all(Path(_flag(argv, "config")).read_text()) if isinstance(d, dict)]
            conn = next((d["clientConnection"] for d in docs if d.get("clientConnection")), {})
            rates[name] = {"qps": conn.get("qps"), "burst": conn.get("burst"), "set": bool(conn)}
    return rates


def failed_creates(kube, namespace: str) -> dict[str, int]:
    """The pod creations the Job controller saw refused (its FailedCreate events, their counts), by why (the
    message's first words: which webhook refused and how, without the pod's name)."""
    why: dict[str, int] = {}
    for event in kube.list("v1", "Event", namespace):
        if event.get("reason") == "FailedCreate":
            message = re.sub(r"[a-z0-9-]+-\d+-\d+-[a-z0-9]+", "<pod>", event.get("message") or "")[:160]
            why[message] = why.get(message, 0) + int(event.get("count") or 1)
    return why


def run_case(case: Case, state: Path, timeout: float) -> dict:
    objects, jobset = _without_run(declare(case))
    want = int(expected_pods(jobset))
    with control_plane(state, LIFETIME, tool_names=CONTROL_PLANE_TOOLS, extra_args=case.extra_args()) as cp:
        kube = cp.client()
        started = time.monotonic()
        install_stack(cp, kube, objects)
        installed_s = time.monotonic() - started
        pids = {name: p.pid for name, p in cp.supervisor.children.items()}
        idle = Sampler(pids)
        idle.start()
        time.sleep(IDLE_SECONDS)
        idle_usage = idle.stop()
        load_before = [round(x, 2) for x in load_average()]
        where = (cp.server, cp.pki.tokens["admin"], str(cp.pki.ca_cert), objects.runs_namespace,
                 f"{JOBSET_NAME_LABEL}={RUN}")
        watch, job_watch = PodWatch(*where), PodWatch(*where, path="/apis/batch/v1/namespaces/{namespace}/jobs")
        watch.start()
        job_watch.start()
        sampler = Sampler(pids)
        sampler.start()
        t0 = time.monotonic()
        kube.apply(jobset)
        deadline = t0 + timeout
        bound = _wait(watch, "bound", want, deadline)
        running = _wait(watch, "running", want, deadline) if bound else None
        spent = time.monotonic() - t0
        usage = _usage(sampler.stop(), idle_usage, spent)
        watch.stop()
        job_watch.stop()
        refused = failed_creates(kube, objects.runs_namespace)
        rates = client_rates(pids)
        pods = kube.list("v1", "Pod", objects.runs_namespace, labels=f"{JOBSET_NAME_LABEL}={RUN}")
        nodes = {n["metadata"]["name"]: n for n in kube.list("v1", "Node")}
        not_ready = sum(1 for n in nodes.values() if not ready(n))
        times, job_times = watch.snapshot(), job_watch.snapshot()
    bound_at = sorted(t.bound - t0 for t in times.values() if t.bound)
    created_at = sorted(t.created - t0 for t in times.values() if t.created)
    total_cpu = sum(u["cpu_s"] for u in usage.values())
    net_cpu = sum(u["net_cpu_s"] for u in usage.values())
    return {
        "slices": case.slices, "nodes": case.slices * 64, "pods": want, "strategy": case.strategy,
        "kueue": case.kueue, "rep": case.rep, "api_qps": case.api_qps, "load_before": load_before,
        "install_s": round(installed_s, 1),
        "bound_s": round(bound - t0, 1) if bound else None, "running_s": round(running - t0, 1) if running else None,
        "created_s": round(created_at[-1], 1) if created_at else None,
        "created_median_s": round(created_at[len(created_at) // 2], 1) if created_at else None,
        "bound_median_s": round(bound_at[len(bound_at) // 2], 1) if bound_at else None,
        "pods_bound": len(bound_at), "nodes_not_ready": not_ready, "exclusive": exclusive(pods, nodes, case.slices) if bound else "timed out",
        "cpu_s": round(total_cpu, 1), "net_cpu_s": round(net_cpu, 1),
        "net_cpu_ms_per_pod": round(1000 * net_cpu / want, 2), "components": usage,
        "phases": phases(job_times, times, t0), "failed_creates": sum(refused.values()), "refused_why": refused, "client_rates": rates,
        "timeline": timeline(times, t0), "watch_errors": (watch.errors + job_watch.errors)[:5],
        "cpus": os.cpu_count(),
    }
