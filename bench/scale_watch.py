"""When each of a run's objects was created (its Jobs, its pods) and each pod bound and running, from
watches on the API server.

A watch (`?watch=1`) streams every change of the selected pods as it is stored, so the
times are those at which the API server said so, read as they arrive, without listing
thousands of pods again and again (which would itself load the API server being measured).
https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass, field


@dataclass
class PodTimes:
    created: float | None = None
    bound: float | None = None
    running: float | None = None
    node: str | None = None
    job: str | None = None  # the JobSet's job index (its slice)
    leader: bool = False  # completion index 0: the pod JobSet's exclusive placement waits on


JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"


@dataclass
class PodWatch:
    """Watches the objects of `namespace` matching `labels` (pods, or with `path` another kind: the
    JobSet's Jobs) from `start()` until `stop()`; each object's times are kept by its name."""

    server: str
    token: str
    ca_file: str
    namespace: str
    labels: str
    path: str = "/api/v1/namespaces/{namespace}/pods"
    pods: dict[str, PodTimes] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def snapshot(self) -> dict[str, PodTimes]:
        with self._lock:
            return {k: PodTimes(**vars(v)) for k, v in self.pods.items()}

    def count(self, what: str) -> int:
        with self._lock:
            return sum(1 for p in self.pods.values() if getattr(p, what) is not None)

    def _run(self) -> None:
        version = ""
        while not self._stop.is_set():
            try:
                version = self._stream(version)
            except (OSError, http.client.HTTPException, ValueError) as err:
                self.errors.append(f"{time.monotonic():.1f} {err}")
                time.sleep(0.5)

    def _stream(self, version: str) -> str:
        """One watch request; returns the last resourceVersion seen, to resume from."""
        host = urllib.parse.urlparse(self.server)
        conn = http.client.HTTPSConnection(host.hostname, host.port, timeout=30,
                                           context=ssl.create_default_context(cafile=self.ca_file))
        query = {"watch": "1", "labelSelector": self.labels, "allowWatchBookmarks": "true",
                 "timeoutSeconds": "300"}
        if version:
            query["resourceVersion"] = version
        path = self.path.format(namespace=self.namespace)
        conn.request("GET", f"{path}?{urllib.parse.urlencode(query)}",
                     headers={"Authorization": f"Bearer {self.token}"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise ValueError(f"watch: {resp.status} {resp.read()[:300]!r}")
        try:
            while not self._stop.is_set():
                line = resp.readline()
                if not line:
                    return version
                event = json.loads(line)
                if event["type"] == "ERROR":  # e.g. 410 Gone: start again from now
                    return ""
                version = event["object"]["metadata"].get("resourceVersion", version)
                if event["type"] != "BOOKMARK":
                    self._record(event["object"], time.monotonic())
        finally:
            conn.close()
        return version

    def _record(self, pod: dict, now: float) -> None:
        name = pod["metadata"]["name"]
        with self._lock:
            labels = pod["metadata"].get("labels") or {}
            times = self.pods.setdefault(name, PodTimes(created=now, job=labels.get(JOB_INDEX_LABEL),
                                                        leader=labels.get(COMPLETION_INDEX_LABEL) == "0"))
            node = pod.get("spec", {}).get("nodeName")
            if node and times.bound is None:
                times.bound, times.node = now, node
            if pod.get("status", {}).get("phase") == "Running" and times.running is None:
                times.running = now
