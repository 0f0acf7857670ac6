"""What the API server says happened to a stack's runs: their pods, the nodes they're bound to, Kueue's admissions."""

from __future__ import annotations

import re
import ssl
import urllib.request
from dataclasses import dataclass

from core.catalog import NODEPOOL_LABEL
from e2e.harness.kube import ApiError, Kube, wait_for

JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
KUEUE = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


@dataclass(frozen=True)
class PodPlacement:
    run: str
    job: str  # the child Job (one slice of a multislice run)
    pod: str
    phase: str
    node: str | None
    node_pool: str | None  # the node's cloud.google.com/gke-nodepool
    unschedulable: str | None  # the scheduler's message while it is Pending


@dataclass(frozen=True)
class Admission:
    workload: str
    owner: str
    admitted: bool
    flavors: dict[str, str]  # resource -> flavor, of every pod set
    conditions: dict[str, str]  # type -> "status reason: message"


def placements(kube: Kube, namespace: str, run: str | None = None) -> list[PodPlacement]:
    selector = f"{JOBSET_NAME_LABEL}={run}" if run else JOBSET_NAME_LABEL
    pools = {n["metadata"]["name"]: n["metadata"]["labels"].get(NODEPOOL_LABEL) for n in kube.list("v1", "Node")}
    out = []
    for pod in kube.list("v1", "Pod", namespace, labels=selector):
        meta, spec, status = pod["metadata"], pod["spec"], pod.get("status", {})
        scheduled = next((c for c in status.get("conditions") or [] if c["type"] == "PodScheduled"), {})
        node = spec.get("nodeName")
        out.append(PodPlacement(
            run=meta["labels"][JOBSET_NAME_LABEL], job=meta["labels"].get(JOB_NAME_LABEL, ""), pod=meta["name"],
            phase=status.get("phase", ""), node=node, node_pool=pools.get(node) if node else None,
            unschedulable=None if node else scheduled.get("message"),
        ))
    return sorted(out, key=lambda p: (p.run, p.job, p.pod))


def admissions(kube: Kube, namespace: str) -> list[Admission]:
    """Kueue's Workloads in `namespace`; none where the stack installs no Kueue (no such API)."""
    try:
        workloads = kube.list(KUEUE, "Workload", namespace)
    except ApiError as err:
        if err.status != 404:
            raise
        return []
    out = []
    for wl in workloads:
        status = wl.get("status", {})
        flavors = {}
        for assignment in (status.get("admission") or {}).get("podSetAssignments", []):
            flavors.update(assignment.get("flavors", {}))
        conditions = {c["type"]: f"{c['status']} {c.get('reason', '')}: {c.get('message', '')}"
                      for c in status.get("conditions") or []}
        owner = next((o["name"] for o in wl["metadata"].get("ownerReferences", [])), "")
        admitted = any(c["type"] == "Admitted" and c["status"] == "True" for c in status.get("conditions") or [])
        out.append(Admission(wl["metadata"]["name"], owner, admitted, flavors, conditions))
    return sorted(out, key=lambda a: a.owner)


def report_lines(stack: str, applied: list[str], left_out: list[str], jobs: list[str],
                 pods: list[PodPlacement], admitted: list[Admission]) -> list[str]:
    lines = [f"== stack {stack}: {len(applied)} objects accepted by the API server"]
    kinds: dict[str, int] = {}
    for entry in applied:
        kinds[entry.split(" ", 1)[0]] = kinds.get(entry.split(" ", 1)[0], 0) + 1
    lines.append("   " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    lines += [f"   left out: {x}" for x in left_out]
    lines += [f"   staging Job complete: {j}" for j in jobs]
    for p in pods:
        where = f"on {p.node} (pool {p.node_pool})" if p.node else f"unbound: {p.unschedulable}"
        lines.append(f"   pod {p.pod} [{p.phase}] {where}")
    for a in admitted:
        state = f"admitted on {a.flavors}" if a.admitted else f"not admitted: {a.conditions}"
        lines.append(f"   kueue workload of {a.owner}: {state}")
    return lines


def expected_pods(jobset: dict) -> int:
    """Pods a JobSet's Jobs create: replicas x parallelism of each replicated job. A run Kueue
    manages is declared suspended and Kueue unsuspends it when it admits it, so its pods count in
    full; any other suspended JobSet creates none."""
    if jobset["spec"].get("suspend") and QUEUE_LABEL not in jobset["metadata"].get("labels", {}):
        return 0
    return sum(rj.get("replicas", 1) * rj["template"]["spec"].get("parallelism", 1)
               for rj in jobset["spec"]["replicatedJobs"])


def wait_bound(kube: Kube, jobset: dict, timeout: float) -> list[PodPlacement]:
    """Every pod of the JobSet created and bound; on timeout the error carries each pod's
    state, the scheduler's own message for a pod it couldn't place included."""
    name, ns = jobset["metadata"]["name"], jobset["metadata"]["namespace"]
    want = expected_pods(jobset)

    def probe():
        pods = placements(kube, ns, name)
        return pods if len(pods) == want and all(p.node for p in pods) else None

    return wait_for(f"{want} pods of JobSet {ns}/{name} bound", probe, timeout,
                    explain=lambda: _where(placements(kube, ns, name), want))


def _where(pods: list[PodPlacement], want: int) -> str:
    """Each pod's node, or the scheduler's own message for a pod it couldn't place."""
    return f"{len(pods)} of {want} pods: " + "; ".join(
        f"{p.pod} on {p.node}" if p.node else f"{p.pod} unbound: {p.unschedulable}" for p in pods)


def wait_unschedulable(kube: Kube, jobset: dict, timeout: float) -> list[dict]:
    """Every pod of the JobSet created, none bound, and each refused by the scheduler: its PodScheduled
    condition False with reason Unschedulable, which kube-scheduler writes after a scheduling attempt
    finds no node, with the message that says why (k8s.io/kubernetes v1.35.4 pkg/scheduler/schedule_one.go,
    `handleSchedulingFailure`). A test of a pod that must not be placed waits for that verdict, not a
    fixed time."""
    name, ns = jobset["metadata"]["name"], jobset["metadata"]["namespace"]
    want = expected_pods(jobset)

    def refused(pod: dict) -> bool:
        return not pod["spec"].get("nodeName") and any(
            c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable"
            for c in pod.get("status", {}).get("conditions") or [])

    def probe():
        pods = kube.list("v1", "Pod", ns, labels=f"{JOBSET_NAME_LABEL}={name}")
        return pods if len(pods) == want and all(refused(p) for p in pods) else None

    return wait_for(f"{want} pods of JobSet {ns}/{name} refused by the scheduler", probe, timeout,
                    explain=lambda: _where(placements(kube, ns, name), want))


def scheduler_requests(server: str, token: str) -> dict[tuple[str, str], dict[str, float]]:
    """What the scheduler itself counts as each pod's request, (namespace, pod) -> resource -> value.

    kube-scheduler serves `kube_pod_resource_request` at /metrics/resources, computed with
    `resourcehelper.PodRequests`, the helper its NodeResourcesFit plugin uses too (containers,
    init containers, native sidecars, overhead); zero values are left out, terminal pods skipped
    (k8s.io/kubernetes v1.35.4 pkg/scheduler/metrics/resources/resources.go,
    cmd/kube-scheduler/app/server.go installMetricHandler)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the scheduler's own self-signed serving certificate
    req = urllib.request.Request(f"{server}/metrics/resources", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, context=context, timeout=10) as resp:
        text = resp.read().decode()
    out: dict[tuple[str, str], dict[str, float]] = {}
    for line in text.splitlines():
        if not line.startswith("kube_pod_resource_request{"):
            continue
        labels_text, value = line[len("kube_pod_resource_request{"):].rsplit("} ", 1)
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', labels_text))
        out.setdefault((labels["namespace"], labels["pod"]), {})[labels["resource"]] = float(value)
    return out
