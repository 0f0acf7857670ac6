"""The ladder's next rung after an eviction: moves a run Kueue evicted for `PodsReadyTimeout` one rung down.

Kueue 0.19.2 requeues an evicted run and scans its flavors from the first again, so a run whose nodes never
came (a stock-out) is admitted on the same rung again (docs/capacity.md, "After an eviction"). This process
runs in the stack's namespace (manifests/ladder.py declares it) and, for every JobSet that carries its
ladder (annotation `gke-finetune/ladder`: the node label that tells the rungs apart and its value on each
rung, in order):

- while the run is admitted (not suspended), it records the rung Kueue put it on (the label's value Kueue
  injected into the pod templates' nodeSelector with the flavor's node labels) in the annotation
  `gke-finetune/ladder-admitted`;
- once its Workload is evicted for `PodsReadyTimeout` and Kueue has suspended the JobSet, it moves the run
  to the rung after the recorded one, in three requests that a later pass repeats or finishes: it marks
  the evicted Workload with the target rung (annotation `gke-finetune/ladder-moving-to`) and deactivates it
  (`spec.active: false`, so Kueue can't admit it again meanwhile), pins the pod templates' nodeSelector to
  the target, and deletes the marked Workload. JobSet v0.12 accepts a nodeSelector change on a suspended
  JobSet only (pkg/webhooks/jobset_webhook.go, ValidateUpdate: a suspended JobSet's pod template
  nodeSelector, labels, annotations, tolerations and scheduling gates may change). Kueue 0.19.2 keeps a
  Workload whose JobSet's selector changed, so the old one is deleted, and Kueue makes a new Workload from
  the JobSet as it now is; it matches flavors against the pinned selector, where only a flavor whose node
  labels hold the same value fits (pkg/scheduler/flavorassigner/flavorassigner.go, flavorSelector: only the
  keys a flavor's nodeLabels name count). The requeue backoff (`kueue.requeueBackoffSeconds`) leaves the
  time to mark the Workload before Kueue could admit it again.

On the last rung nothing moves: Kueue's own backoff and `kueue.requeueLimit` apply there. Each move is
written to standard output as a JSON line and as an Event on the JobSet.

Standard library only: the file is shipped in a ConfigMap and run by a stock Python image. It talks to the
API server with its pod's service account (the token file is read again for every request: kubelet rotates
it). Outside a pod (the e2e), SERVICE_ACCOUNT_DIR and KUBERNETES_SERVICE_HOST/PORT say where they are. The
pod's probes run the same file with `--probe alive` (the loop turns) and `--probe ready` (a pass succeeded
lately), which read the times it writes to LADDER_STATE_DIR.
"""

from __future__ import annotations

import datetime
import http.client
import json
import os
import ssl
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

LADDER = "gke-finetune/ladder"
ADMITTED = "gke-finetune/ladder-admitted"
MOVING = "gke-finetune/ladder-moving-to"  # on a Workload being replaced: the rung its JobSet moves to
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets"
WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads"
EVENTS = "/api/v1/namespaces/{ns}/events"
# The Evicted condition's reason for a pods-ready timeout (Kueue v0.19.2 apis/kueue/v1beta2/workload_types.go,
# WorkloadEvictedByPodsReadyTimeout).
NOT_READY = "PodsReadyTimeout"
MANAGER = "gke-finetune-ladder"
CONFIG_ERROR = 78  # trainers/exit_codes.py: a restart can't fix it
PROBE_MIN_SECONDS = 60  # a probe fails once the last pass is older than this (or 10 polls)


@dataclass(frozen=True)
class Ladder:
    label: str  # the node label whose value tells the rungs apart
    rungs: tuple[str, ...]  # its value on each rung, in the order Kueue tries them

    @classmethod
    def of(cls, jobset: dict) -> Ladder | None:
        text = _annotations(jobset).get(LADDER)
        if not text:
            return None
        value = json.loads(text)
        return cls(value["label"], tuple(value["rungs"]))

    def after(self, rung: str | None) -> str | None:
        """The rung after `rung` (after the first where `rung` is unknown); None past the last."""
        i = self.rungs.index(rung) if rung in self.rungs else 0
        return self.rungs[i + 1] if i + 1 < len(self.rungs) else None


def _annotations(obj: dict) -> dict:
    return (obj.get("metadata") or {}).get("annotations") or {}


def _jobset_path(jobset: dict) -> str:
    return f"{JOBSETS}/{jobset['metadata']['name']}"


def _pod_specs(jobset: dict) -> list[dict]:
    return [rj["template"]["spec"]["template"]["spec"] for rj in jobset["spec"].get("replicatedJobs", [])]


def _on(jobset: dict, label: str) -> str | None:
    """The rung the pod templates select, where they all select one."""
    values = {(spec.get("nodeSelector") or {}).get(label) for spec in _pod_specs(jobset)}
    return values.pop() if len(values) == 1 else None


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def evicted_not_ready(workload: dict) -> bool:
    """Kueue evicted it because its pods were not all ready in time, and hasn't admitted it again."""
    conditions = (workload.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Evicted" and c.get("status") == "True" and c.get("reason") == NOT_READY
               for c in conditions)


def owned_by(workload: dict, jobset: dict) -> bool:
    uid = jobset["metadata"]["uid"]
    return any(o.get("uid") == uid for o in workload["metadata"].get("ownerReferences") or []) \
        and not workload["metadata"].get("deletionTimestamp")


@dataclass(frozen=True)
class Action:
    """One request to the API server: `path` under the namespace (JOBSETS or WORKLOADS, then a name)."""

    method: str
    path: str
    body: object = None
    content_type: str = "application/json"


@dataclass(frozen=True)
class Step:
    actions: tuple[Action, ...]
    moved: tuple[str | None, str] | None = None  # (from, to) when the run starts down its ladder


def _record(jobset: dict, ladder: Ladder) -> Step | None:
    """An admitted run: the rung Kueue put it on, recorded once (durable across restarts of this process)."""
    on = _on(jobset, ladder.label)
    if on not in ladder.rungs or _annotations(jobset).get(ADMITTED) == on:
        return None
    op = {"op": "add", "path": f"/metadata/annotations/{_pointer(ADMITTED)}", "value": on}
    return Step((Action("PATCH", _jobset_path(jobset), [op], JSON_PATCH),))


def _pin(jobset: dict, ladder: Ladder, target: str) -> list[Action]:
    """The pod templates' selector set to `target`; none if it is already. The test makes the patch fail
    if Kueue unsuspended the run meanwhile (a running JobSet's selector is immutable anyway)."""
    if _on(jobset, ladder.label) == target:
        return []
    ops: list[dict] = [{"op": "test", "path": "/spec/suspend", "value": True}]
    for i, spec in enumerate(_pod_specs(jobset)):
        base = f"/spec/replicatedJobs/{i}/template/spec/template/spec/nodeSelector"
        if "nodeSelector" in spec:
            ops.append({"op": "add", "path": f"{base}/{_pointer(ladder.label)}", "value": target})
        else:
            ops.append({"op": "add", "path": base, "value": {ladder.label: target}})
    return [Action("PATCH", _jobset_path(jobset), ops, JSON_PATCH)]


def _replace(jobset: dict, ladder: Ladder, workload: dict, target: str) -> list[Action]:
    """Pin the run to `target`, then delete the Workload Kueue made for its old pod sets: Kueue 0.19.2 keeps a
    Workload whose JobSet's selector changed and would admit it on its old flavor, then fail to start it on
    the conflicting selector (`FailedToStart`, seen in e2e/tests/test_kueue_eviction.py); for a suspended
    JobSet without a Workload it makes a new one from the JobSet as it is now."""
    return [*_pin(jobset, ladder, target),
            Action("DELETE", f"{WORKLOADS}/{workload['metadata']['name']}")]


def next_step(jobset: dict, workloads: list[dict]) -> Step | None:
    """What the JobSet needs now, given the namespace's Workloads: record its rung, move it on, or nothing.

    A move is three requests, each safe to repeat, so that a pass cut short is finished by the next:
    mark the evicted Workload with its target rung and deactivate it (`spec.active: false`: Kueue admits
    it no more, and evicts it if it was admitted meanwhile, reason `Deactivated`: v0.19.2
    pkg/controller/core/workload_controller.go, WorkloadEvictedByDeactivation), pin the JobSet to the
    target, delete the marked Workload."""
    ladder = Ladder.of(jobset)
    if ladder is None or jobset["metadata"].get("deletionTimestamp"):
        return None
    owned = [w for w in workloads if owned_by(w, jobset)]
    marked = [w for w in owned if _annotations(w).get(MOVING)]
    if not jobset["spec"].get("suspend"):
        # Admitted; or admitted again before a move was done, which the marked Workload's deactivation undoes.
        return None if marked else _record(jobset, ladder)
    if marked:
        target = _annotations(marked[0])[MOVING]
        return Step(tuple(a for w in marked for a in _replace(jobset, ladder, w, target)))
    evicted = [w for w in owned if evicted_not_ready(w)]
    if not evicted:
        return None
    left = _annotations(jobset).get(ADMITTED) or _on(jobset, ladder.label)
    target = ladder.after(left)
    if target is None:
        return None  # the last rung: Kueue's backoff and requeueLimit apply there
    workload = evicted[0]
    mark = Action("PATCH", f"{WORKLOADS}/{workload['metadata']['name']}",
                  {"metadata": {"annotations": {MOVING: target}}, "spec": {"active": False}}, MERGE_PATCH)
    return Step((mark, *_replace(jobset, ladder, workload, target)), (left, target))


class Api:
    """The API server, as the pod's service account."""

    def __init__(self, account_dir: Path, host: str, port: int, timeout: float = 30.0):
        self.account_dir, self.host, self.port, self.timeout = account_dir, host, port, timeout
        self.namespace = (account_dir / "namespace").read_text().strip()
        self._ssl = ssl.create_default_context(cafile=str(account_dir / "ca.crt"))

    def call(self, method: str, path: str, body: object = None,
             content_type: str = "application/json") -> dict:
        token = (self.account_dir / "token").read_text().strip()
        conn = http.client.HTTPSConnection(self.host, self.port, context=self._ssl, timeout=self.timeout)
        try:
            # The name its changes carry in the objects' managedFields (beside Pulumi's and Kueue's).
            headers = {"Authorization": f"Bearer {token}", "Accept": "application/json", "User-Agent": MANAGER}
            data = None if body is None else json.dumps(body).encode()
            if data is not None:
                headers["Content-Type"] = content_type
            query = f"?fieldManager={MANAGER}" if method == "PATCH" else ""
            conn.request(method, path.format(ns=self.namespace) + query, body=data, headers=headers)
            response = conn.getresponse()
            payload = response.read()
            if response.status >= 300:
                raise ApiError(response.status, f"{method} {path}: {response.status} {payload[:300]!r}")
            return json.loads(payload) if payload else {}
        finally:
            conn.close()


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def event(jobset: dict, moved: tuple[str | None, str], namespace: str) -> dict:
    """A core/v1 Event on the JobSet (what `kubectl describe jobset` and `kubectl get events` show)."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    name = jobset["metadata"]["name"]
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{name}.{uuid.uuid4().hex[:12]}", "namespace": namespace},
        "involvedObject": {"apiVersion": jobset["apiVersion"], "kind": "JobSet", "name": name,
                           "namespace": namespace, "uid": jobset["metadata"]["uid"]},
        "reason": "NextRung", "type": "Normal",
        "message": f"pods not ready on rung {moved[0]} within Kueue's waitForPodsReady timeout: "
                   f"pinned to rung {moved[1]}",
        "source": {"component": MANAGER}, "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    }


def sync(api: Api) -> int:
    """One pass over the namespace's JobSets; the number of JobSets acted on."""
    jobsets = api.call("GET", JOBSETS).get("items") or []
    workloads = api.call("GET", WORKLOADS).get("items") or []
    acted = 0
    for jobset in jobsets:
        step = next_step(jobset, workloads)
        if step is None:
            continue
        name = jobset["metadata"]["name"]
        done = 0
        try:
            for action in step.actions:
                api.call(action.method, action.path, action.body, action.content_type)
                done += 1
        except ApiError as e:
            # 404: gone meanwhile; 409 and 422: changed meanwhile (the test failed: admitted again) or refused.
            # The marks stay, and the next pass goes on from them.
            if e.status not in (404, 409, 422):
                raise
            log("left for the next pass", jobset=name, why=str(e))
        acted += 1
        if step.moved and done:  # the Workload is marked: the move is under way
            log("moved", jobset=name, rung_from=step.moved[0], rung_to=step.moved[1])
            try:
                api.call("POST", EVENTS, event(jobset, step.moved, api.namespace))
            except ApiError as e:  # the move stands without its Event
                log("event not written", why=str(e))
    return acted


def log(what: str, **fields: object) -> None:
    print(json.dumps({"time": time.time(), "what": what, **fields}), flush=True)


def _touch(path: Path) -> None:
    try:
        path.write_text(str(time.time()))
    except OSError as e:  # no probe file: the probe fails, which says so
        log("probe file not written", path=str(path), why=str(e))


def probe(state_dir: Path, which: str, interval: float) -> int:
    """The pod's probes: `alive`, a pass was tried lately (the loop turns); `ready`, one succeeded lately."""
    path = state_dir / which
    try:
        age = time.time() - path.stat().st_mtime
    except OSError:
        return 1
    return 0 if age <= max(PROBE_MIN_SECONDS, 10 * interval) else 1


def main(argv: list[str]) -> int:
    account_dir = Path(os.environ.get("SERVICE_ACCOUNT_DIR", "/var/run/secrets/kubernetes.io/serviceaccount"))
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    interval = float(os.environ.get("LADDER_POLL_SECONDS", "2"))
    state_dir = Path(os.environ.get("LADDER_STATE_DIR", "/run/ladder"))
    if argv[:1] == ["--probe"] and argv[1:] in (["alive"], ["ready"]):
        return probe(state_dir, argv[1], interval)
    if argv:
        log("unknown arguments", argv=argv, allowed="none, or --probe alive|ready")
        return CONFIG_ERROR
    if not host or not (account_dir / "token").is_file():
        log("no API server", host=host, account_dir=str(account_dir))
        return CONFIG_ERROR
    api = Api(account_dir, host, int(port))
    log("started", namespace=api.namespace, poll_seconds=interval)
    while True:
        try:
            sync(api)
            _touch(state_dir / "ready")
        except (ApiError, OSError, ValueError) as e:  # the API server restarting, a timeout: the next pass retries
            log("pass failed", why=str(e))
        _touch(state_dir / "alive")
        time.sleep(interval)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
