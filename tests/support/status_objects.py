"""The objects `make status` reads, as the controllers write them (JobSet v0.12.0, Kueue v0.19.2 Workload,
ProvisioningRequest, pods) and the trainers' progress record, at times relative to a fixed NOW."""

from __future__ import annotations

import datetime
import json
import os
import socket
from pathlib import Path

from core.names import RUNS_NAMESPACE, cluster_scoped

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime.datetime(2026, 12, 2, 12, 0, tzinfo=datetime.timezone.utc).timestamp()


def at(seconds_ago: float) -> str:
    t = datetime.datetime.fromtimestamp(NOW - seconds_ago, datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def cond(kind: str, state: bool = True, reason: str = "", message: str = "", ago: float = 0) -> dict:
    return {"type": kind, "status": "True" if state else "False", "reason": reason, "message": message,
            "lastTransitionTime": at(ago)}


def jobset(name: str, conditions=(), restarts=0, counted=0, ready=0, submitted=3 * 3600, suspend=False) -> dict:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": "finetune", "creationTimestamp": at(submitted), "uid": f"{name}-uid"},
            "spec": {"suspend": suspend, "failurePolicy": {"maxRestarts": 3}},
            "status": {"conditions": list(conditions), "restarts": restarts, "restartsCountTowardsMax": counted,
                       "replicatedJobsStatus": [{"name": "trainer", "ready": ready, "active": 1}]}}


def workload(run: str, conditions=(), flavor: str | None = None, checks=(), active=True,
             namespace: str = RUNS_NAMESPACE) -> dict:
    """`flavor`: the pool Kueue admitted the run on, whose ResourceFlavor is named after the namespace
    and the pool (core/contract.py SchedulingContract.flavor)."""
    status = {"conditions": list(conditions), "admissionChecks": list(checks)}
    if flavor:
        flavor = cluster_scoped(namespace, flavor)
        status["admission"] = {"clusterQueue": "finetune", "podSetAssignments": [
            {"name": "trainer", "flavors": {"google.com/tpu": flavor, "cpu": flavor}, "count": 2}]}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": f"jobset-{run}-1a2b3", "namespace": "finetune",
                         "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": run,
                                              "uid": f"{run}-uid", "controller": True}]},
            "spec": {"active": active, "queueName": "finetune"}, "status": status}


def request(wl: str, check: str, attempt: int, conditions=()) -> dict:
    return {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
            "metadata": {"name": f"{wl}-{check}-{attempt}", "namespace": "finetune", "creationTimestamp": at(600 - attempt),
                         "ownerReferences": [{"kind": "Workload", "name": wl, "controller": True}]},
            "status": {"conditions": list(conditions)}}


def pod(run: str, i: int, ready: bool, exit_code: int | None = None, unschedulable: str = "") -> dict:
    conditions = [cond("Ready", ready)]
    if unschedulable:
        conditions.append(cond("PodScheduled", False, "Unschedulable", unschedulable))
    statuses = []
    if exit_code is not None:
        statuses = [{"name": "trainer", "state": {"terminated": {"exitCode": exit_code, "finishedAt": at(60)}}}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{run}-trainer-0-{i}", "namespace": "finetune", "labels": {"gke-finetune/run": run}},
            "status": {"conditions": conditions, "containerStatuses": statuses}}


def record(step=100, total=400, train_seconds=1000.0, started=2 * 3600, updated=60, **extra) -> dict:
    base = {"schema": 1, "trainer": "gemma-jax", "run": None, "step": step, "total_steps": total,
            "tokens_per_s": 5120.0, "loss": 2.5, "eval_loss": 2.75, "eval_step": 80, "checkpoint_step": 96,
            "started_at": at(started), "attempt_started_at": at(started), "updated_at": at(updated),
            "starts": 1, "train_seconds": train_seconds, "restore_seconds": 120.0, "redone_steps": 0}
    return base | extra


# The context `gcloud container clusters get-credentials` writes for the tpu-queued stack's own cluster.
TPU_QUEUED_CONTEXT = "gke_my-project-id_us-east5_finetune-tpu-queued"


def kubeconfig_with(servers: dict[str, str], current: str | None = None) -> dict:
    """A kubeconfig with a context per server; `current` is also a context, of a closed port, made current."""
    if current:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            servers = {**servers, current: f"http://127.0.0.1:{s.getsockname()[1]}"}
    names = list(servers)
    return {"apiVersion": "v1", "kind": "Config", "current-context": current or names[0],
            "clusters": [{"name": n, "cluster": {"server": url, "insecure-skip-tls-verify": url.startswith("https")}}
                         for n, url in servers.items()],
            "users": [{"name": "me", "user": {"token": "t"}}],
            "contexts": [{"name": n, "context": {"cluster": n, "user": "me"}} for n in names]}


class ApiServer:
    """A Kubernetes API on 127.0.0.1 that serves fixed objects by path (plain HTTP), for the real client."""

    def __init__(self, routes: dict[str, dict | None]):
        import http.server
        import threading

        self.routes = routes
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (the http.server API)
                body = outer.routes.get(self.path.split("?")[0])
                code = 200 if body is not None else 404
                if body is None:
                    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def kubeconfig(self, path: Path, context: str = TPU_QUEUED_CONTEXT, current: str | None = None) -> dict:
        """A kubeconfig whose `context` is this server; `current` (another context, on a closed port) is current."""
        path.write_text(json.dumps(kubeconfig_with({context: self.url}, current)))
        return {**os.environ, "KUBECONFIG": str(path)}


def served_pod(run: str) -> dict:
    """A pod as the API serves it (the fields the client requires)."""
    p = pod(run, 0, True)
    p["spec"] = {"containers": [{"name": "trainer", "image": "trainer@sha256:0"}]}
    p["status"]["containerStatuses"] = [{"name": "trainer", "image": "trainer@sha256:0", "imageID": "", "ready": True,
                                         "restartCount": 0, "state": {"running": {"startedAt": at(600)}}}]
    return p
