"""A run's pods and JobSet as the API server returns them, and a cluster that changes on cue, for the run
commands' tests (tools/runs/)."""

from __future__ import annotations

from collections.abc import Iterator

from tools.runs.cluster import Gone

NS = "finetune"


def pod(run: str, index: int, attempt: int = 0, hosts: int = 1, state: str = "running", code: int | None = None,
        reason: str = "", created: str = "2026-12-04T10:00:00Z", deleting: bool = False) -> dict:
    """A run pod of process `index` (slice index // hosts, host index % hosts), attempt `attempt`."""
    slice_, host = divmod(index, hosts)
    name = f"{run}-trainer-{slice_}-{host}-a{attempt}"
    container: dict = {"name": "trainer"}
    if state == "running":
        container["state"] = {"running": {"startedAt": created}}
    elif state == "terminated":
        container["state"] = {"terminated": {"exitCode": code or 0, "reason": reason or ("Completed" if not code else "Error"),
                                             "finishedAt": created}}
    else:
        container["state"] = {"waiting": {"reason": "ContainerCreating"}}
    phase = {"running": "Running", "waiting": "Pending"}.get(state, "Failed" if code else "Succeeded")
    meta = {"name": name, "namespace": NS, "creationTimestamp": created,
            "labels": {"jobset.sigs.k8s.io/jobset-name": run, "jobset.sigs.k8s.io/job-index": str(slice_),
                       "batch.kubernetes.io/job-completion-index": str(host),
                       "jobset.sigs.k8s.io/restart-attempt": str(attempt), "gke-finetune/run": run}}
    if deleting:
        meta["deletionTimestamp"] = created
    return {"metadata": meta, "spec": {"nodeName": f"node-{index}", "containers": [{"name": "trainer"}]},
            "status": {"phase": phase, "containerStatuses": [container]}}


def jobset(run: str, done: str = "") -> dict:
    conditions = [{"type": done, "status": "True", "reason": "x", "message": "y"}] if done else []
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": run, "namespace": NS}, "spec": {}, "status": {"conditions": conditions}}


class ScriptedCluster:
    """A cluster whose pods and JobSet follow a script: each `pods()` call after the first `advance_after`
    calls moves to the next step. Logs: pod name -> lines; `follow` yields them, then ends (as the kubelet
    ends a stream when its container stops) unless the pod is in `hanging` (as kwok's streams never end)."""

    def __init__(self, steps: list[tuple[list[dict], dict | None]], logs: dict[str, list[str]],
                 advance_after: int = 2, hanging: frozenset[str] = frozenset(), breaks: dict[str, int] | None = None):
        self.steps, self.logs, self.advance_after, self.hanging = steps, logs, advance_after, hanging
        self.breaks = dict(breaks or {})  # pod -> the stream breaks after this many lines, once
        self.calls = 0
        self.since: list[int | None] = []

    @property
    def step(self) -> tuple[list[dict], dict | None]:
        return self.steps[min(self.calls // self.advance_after, len(self.steps) - 1)]

    def pods(self, run: str) -> list[dict]:
        self.calls += 1
        return self.step[0]

    def jobset(self, run: str) -> dict | None:
        return self.step[1]

    def log(self, pod: str, container: str, tail: int | None = None) -> str:
        if pod not in self.logs:
            raise Gone("404 Not Found")
        lines = self.logs[pod]
        return "\n".join(lines[-tail:] if tail else lines) + "\n"

    def follow(self, pod: str, container: str, since_seconds: int | None = None) -> Iterator[str]:
        if pod not in self.logs:
            raise Gone("404 Not Found")
        self.since.append(since_seconds)
        lines = self.logs[pod]
        if pod in self.breaks:
            cut = self.breaks.pop(pod)
            yield from lines[:cut]
            raise ConnectionResetError("the connection was reset")
        yield from lines if since_seconds is None else lines[-1:]
        if pod in self.hanging:
            import threading

            threading.Event().wait(30)  # a stream that outlives its pod: the follower must leave it
