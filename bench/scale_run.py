"""One case of the scale benchmark (bench/scale.py): a stack declared, installed, its run applied and timed."""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections import defaultdict
from pathlib import Path

from bench.scale_cases import DEFAULT_JOB_SYNCS, DEFAULT_RATES, POOL, TOPOLOGY, TPU_SHAPE, Case, declare, without_runs
from bench.scale_phases import phases, server_phases
from bench.scale_sample import Sampler, load_average
from bench.scale_watch import JOB_INDEX_LABEL, PodWatch, epoch
from core.catalog import NODEPOOL_LABEL, TPU_TOPOLOGY_LABEL
from e2e.harness.faults import ready
from e2e.harness.install import install_stack
from e2e.harness.observe import JOBSET_NAME_LABEL, expected_pods
from e2e.harness.session import control_plane
from e2e.harness.tools import CONTROL_PLANE_TOOLS

IDLE_SECONDS = 10.0  # sampled before the run, for the programs' background (leases, heartbeats)
LIFETIME = 3600
# The label every pod and Job of the case's runs carries (JobSet's), whatever the run's name.
RUNS_SELECTOR = JOBSET_NAME_LABEL
__all__ = ["Case", "POOL", "TOPOLOGY", "declare", "exclusive", "run_case", "timeline"]


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
    --kube-api-qps/--kube-api-burst flags (their defaults when absent, bench/scale_cases.py DEFAULT_RATES) and
    the controller-manager's --concurrent-job-syncs, the managers' `clientConnection` in the --config file
    their chart's ConfigMap gives them."""
    import yaml  # pylint: disable=import-outside-toplevel

    rates = {}
    for name, pid in pids.items():
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        if name in DEFAULT_RATES:
            qps, burst = _flag(argv, "kube-api-qps"), _flag(argv, "kube-api-burst")
            rates[name] = {"qps": float(qps or DEFAULT_RATES[name][0]), "burst": int(burst or DEFAULT_RATES[name][1]),
                           "set": qps is not None}
            if name == "kube-controller-manager":
                rates[name]["concurrent_job_syncs"] = int(_flag(argv, "concurrent-job-syncs") or DEFAULT_JOB_SYNCS)
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


def _observe(cp, objects) -> tuple[PodWatch, PodWatch]:
    where = (cp.server, cp.pki.tokens["admin"], str(cp.pki.ca_cert), objects.runs_namespace, RUNS_SELECTOR)
    return PodWatch(*where), PodWatch(*where, path="/apis/batch/v1/namespaces/{namespace}/jobs")


def _machine(sampler: Sampler, usage: dict) -> dict:
    """The machine while the case ran: its cores, the cores every process kept busy, the share the control
    plane's programs had, and the highest load average seen."""
    ours = sum(u["cpu_s"] for u in usage.values())
    seconds = sampler.seconds or 1.0
    return {"cpus": os.cpu_count(), "busy_cores": round(sampler.machine_busy_s / seconds, 2),
            "control_plane_cores": round(ours / seconds, 2),
            "others_cores": round(max(0.0, sampler.machine_busy_s - ours) / seconds, 2),
            "peak_load": round(sampler.peak_load, 2)}


def run_case(case: Case, state: Path, timeout: float) -> dict:
    objects, jobsets = without_runs(declare(case), case.runs())
    want = sum(int(expected_pods(j)) for j in jobsets)
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
        watch, job_watch = _observe(cp, objects)
        watch.start()
        job_watch.start()
        sampler = Sampler(pids)
        sampler.start()
        t0 = time.monotonic()
        for jobset in jobsets:
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
        created_at = [_server_time(kube.get("jobset.x-k8s.io/v1alpha2", "JobSet", j["metadata"]["name"],
                                            objects.runs_namespace)) for j in jobsets]
        pods = kube.list("v1", "Pod", objects.runs_namespace, labels=RUNS_SELECTOR)
        nodes = {n["metadata"]["name"]: n for n in kube.list("v1", "Node")}
        not_ready = sum(1 for n in nodes.values() if not ready(n))
        times, job_times = watch.snapshot(), job_watch.snapshot()
    return {**_figures(case, want, t0, bound, running, times), "load_before": load_before,
            "install_s": round(installed_s, 1), "nodes_not_ready": not_ready,
            "exclusive": (exclusive(pods, nodes, case.slices) if case.shape == TPU_SHAPE else "-") if bound
            else "timed out",
            **_cpu(usage, want), "machine": _machine(sampler, usage),
            "phases": phases(job_times, times, t0),
            "server_phases": server_phases(job_times, times, min(filter(None, created_at), default=None)),
            "failed_creates": sum(refused.values()), "refused_why": refused, "client_rates": rates,
            "timeline": timeline(times, t0), "watch_errors": (watch.errors + job_watch.errors)[:5]}


def _server_time(obj: dict) -> float | None:
    return epoch(obj["metadata"].get("creationTimestamp"))


def _figures(case: Case, want: int, t0: float, bound: float | None, running: float | None, times: dict) -> dict:
    bound_at = sorted(t.bound - t0 for t in times.values() if t.bound)
    created_at = sorted(t.created - t0 for t in times.values() if t.created)
    return {
        **dataclasses.asdict(case), "nodes": case.slices * (64 if case.shape == TPU_SHAPE else 1), "pods": want,
        "bound_s": round(bound - t0, 1) if bound else None, "running_s": round(running - t0, 1) if running else None,
        "created_s": round(created_at[-1], 1) if created_at else None,
        "created_median_s": round(created_at[len(created_at) // 2], 1) if created_at else None,
        "bound_median_s": round(bound_at[len(bound_at) // 2], 1) if bound_at else None, "pods_bound": len(bound_at),
    }


def _cpu(usage: dict, want: int) -> dict:
    total, net = sum(u["cpu_s"] for u in usage.values()), sum(u["net_cpu_s"] for u in usage.values())
    return {"cpu_s": round(total, 1), "net_cpu_s": round(net, 1), "net_cpu_ms_per_pod": round(1000 * net / want, 2),
            "components": usage}
