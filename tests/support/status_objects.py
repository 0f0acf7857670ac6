"""The objects `make status` reads, as the controllers write them (JobSet v0.12.0, Kueue v0.19.2 Workload,
ProvisioningRequest, pods) and the trainers' progress record, at times relative to a fixed NOW."""

from __future__ import annotations

import datetime
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


