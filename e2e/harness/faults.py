"""Faults a run meets on GKE, played on the local control plane: a program killed and started again,
Spot VMs taken back, a node whose kubelet reports NotReady.

- `kill` / `start` / `restart`: one program of the control plane (the API server with etcd kept,
  the controller-manager, the scheduler, the JobSet or Kueue manager) ended with SIGKILL, as a
  crash or an OOM kill ends it, and started again exactly as before (processes.py `restart`):
  same arguments, ports, certificates and credentials, so what it finds is what it left.
- `reclaim`: GKE taking back Spot VMs. Compute Engine sends the preemption notice and GKE's
  graceful node shutdown gives pods 15 of the 30 seconds before the VM stops
  (https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms, "Termination and graceful
  shutdown of Spot VMs"). The kubelet's shutdown manager then marks each pod Failed, reason
  `Terminated`, with the condition DisruptionTarget (reason TerminationByKubelet) (k8s.io/kubernetes
  v1.35.4 pkg/kubelet/nodeshutdown/nodeshutdown_manager.go, `killPods`); kwok plays no shutdown, so
  this writes that status, the trainer's container ended with its SIGTERM code (143, after its save,
  which takes place within the grace and is tested with the trainers). The VM gone, its Node goes;
  PodGC then force-deletes the pods bound to a node that no longer exists
  (pkg/controller/podgc/gc_controller.go, `gcOrphaned`, after a 40 s quarantine, done here at once).
  `restore` registers the same nodes again: capacity came back and GKE recreated the VMs.
- `stop_kubelet` / `start_kubelet`: a node's kubelet reporting NotReady (Ready=False, reason
  KubeletNotReady, as the kubelet's own status does when its runtime is down: pkg/kubelet/nodestatus/
  setters.go `ReadyCondition`); kwok's node stages leave a node labelled KUBELET_STOPPED_LABEL alone
  (stages.py), its Lease is still renewed, so the node lifecycle controller goes by the reported
  condition, taints the node `node.kubernetes.io/not-ready` (NoSchedule and NoExecute) and the taint
  eviction controller evicts the pods whose toleration of it runs out
  (https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/#taint-based-evictions).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable

from e2e.harness.cluster import ControlPlane, https_ok
from e2e.harness.controllers import manager_ready
from e2e.harness.kube import ApiError, Kube, wait_for
from e2e.harness.stages import KUBELET_STOPPED_LABEL, TERMINATED_EXIT_CODE

PROGRAMS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "jobset-manager", "kueue-manager")
BACK_TIMEOUT = 120.0
SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."
NOT_READY_MESSAGE = "container runtime is down (e2e)"


def _back(cp: ControlPlane, name: str) -> bool:
    if name == "kube-apiserver":
        return cp.client().healthy()
    if name in ("kube-controller-manager", "kube-scheduler"):
        return https_ok(cp.ports[name.removeprefix("kube-")])
    return manager_ready(cp.ports[f"{name}-health"])


def kill(cp: ControlPlane, name: str) -> None:
    if name not in PROGRAMS:
        raise ValueError(f"e2e: no program {name!r} to kill; allowed: {PROGRAMS}")
    cp.supervisor.kill(name)


def start(cp: ControlPlane, name: str) -> float:
    """Start a killed program again; the seconds until it answers its health check."""
    began = time.monotonic()
    cp.supervisor.restart(name)
    wait_for(f"{name} back", lambda: _back(cp, name), BACK_TIMEOUT,
             explain=lambda: cp.supervisor.log_tail(name))
    return time.monotonic() - began


def restart(cp: ControlPlane, name: str, while_down: Callable[[], None] | None = None) -> float:
    """Kill a program, do `while_down` meanwhile, start it again; the seconds it was away."""
    began = time.monotonic()
    kill(cp, name)
    if while_down:
        while_down()
    start(cp, name)
    return time.monotonic() - began


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _shut_down(pod: dict) -> dict:
    """The status the kubelet's shutdown manager leaves a pod with (module docstring)."""
    status = copy.deepcopy(pod.get("status") or {})
    if status.get("phase") != "Succeeded":
        status["phase"] = "Failed"
    status.update(reason="Terminated", message=SHUTDOWN_MESSAGE)
    conditions = [c for c in status.get("conditions") or [] if c["type"] != "DisruptionTarget"]
    conditions.append({"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet",
                       "message": SHUTDOWN_MESSAGE, "lastTransitionTime": _now()})
    status["conditions"] = conditions
    status["containerStatuses"] = [
        {**c, "ready": False, "started": False,
         "state": {"terminated": {"exitCode": TERMINATED_EXIT_CODE, "reason": "Error", "finishedAt": _now(),
                                  "startedAt": (c.get("state", {}).get("running") or {}).get("startedAt", _now())}}}
        for c in status.get("containerStatuses") or []]
    return status


def pods_on(kube: Kube, nodes: list[str]) -> list[dict]:
    return [p for node in nodes for p in kube.list("v1", "Pod", fields=f"spec.nodeName={node}")]


def reclaim(kube: Kube, nodes: list[str]) -> list[dict]:
    """Spot VMs taken back (module docstring); the Node objects as they were, for `restore`."""
    saved = [kube.get("v1", "Node", n) for n in nodes]
    pods = pods_on(kube, nodes)
    for pod in pods:
        meta = pod["metadata"]
        kube.patch_status("v1", "Pod", meta["name"], meta["namespace"], _shut_down(pod))
    for node in nodes:
        kube.delete("v1", "Node", node)
    for pod in pods:  # PodGC: the node is gone
        meta = pod["metadata"]
        try:
            kube.request("DELETE", kube.path("v1", "Pod", meta["namespace"], meta["name"]),
                         {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})
        except ApiError as err:
            if err.status != 404:
                raise
    return saved


def restore(kube: Kube, saved: list[dict]) -> None:
    """The reclaimed nodes registered again (capacity returned); Ready once kwok initializes them."""
    for node in saved:
        fresh = {"apiVersion": "v1", "kind": "Node",
                 "metadata": {"name": node["metadata"]["name"], "labels": node["metadata"].get("labels", {})},
                 "spec": {"taints": [t for t in node["spec"].get("taints") or []
                                     if not t["key"].startswith("node.kubernetes.io/")]},
                 "status": {"capacity": node["status"]["capacity"], "allocatable": node["status"]["allocatable"]}}
        kube.create(fresh)
    names = [n["metadata"]["name"] for n in saved]
    wait_for(f"{len(names)} nodes Ready again", lambda: all(ready(kube.get("v1", "Node", n)) for n in names),
             BACK_TIMEOUT)


def ready(node: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in node.get("status", {}).get("conditions") or [])


def stop_kubelet(kube: Kube, node: str) -> None:
    """The node's kubelet reports NotReady from now on (module docstring)."""
    kube.patch("v1", "Node", node, None, {"metadata": {"labels": {KUBELET_STOPPED_LABEL: "true"}}})
    current = kube.get("v1", "Node", node)["status"].get("conditions") or []
    conditions = [c for c in current if c["type"] != "Ready"] + [{
        "type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": NOT_READY_MESSAGE,
        "lastHeartbeatTime": _now(), "lastTransitionTime": _now()}]
    kube.patch_status("v1", "Node", node, None, {"conditions": conditions})


def start_kubelet(kube: Kube, node: str) -> None:
    """The kubelet is back: kwok's node-initialize stage reports the node Ready again."""
    kube.patch("v1", "Node", node, None, {"metadata": {"labels": {KUBELET_STOPPED_LABEL: None}}})
    wait_for(f"node {node} Ready again", lambda: ready(kube.get("v1", "Node", node)), BACK_TIMEOUT)


def node_taints(kube: Kube, node: str) -> list[dict]:
    return kube.get("v1", "Node", node)["spec"].get("taints") or []
