"""`make logs STACK= RUN= [FOLLOW=1] [POD=<index>|all]`: a run's trainer log.

The process-0 pod's by default (the one that writes the progress record and the checkpoints'
metadata); `--pod <index>` another process of a multi-host run, `--pod all` every one, each line
prefixed with its process index. `--follow` streams the log and follows the run across restarts:
when a pod ends (or is deleted, or a newer attempt's pod replaces it), it says so and waits for the
same process of the next attempt, until the run succeeds, fails or is deleted.

A run whose pods are gone (finished and cleaned up, deleted, or never started) has its logs in
Cloud Logging only: the command says so and prints the query as a link (core/links.py), and exits 0.
The kubelet keeps a container's log only as long as the pod exists
(https://kubernetes.io/docs/concepts/cluster-administration/logging/#log-rotation), GKE sends every
container's stdout and stderr to Cloud Logging
(https://cloud.google.com/kubernetes-engine/docs/concepts/about-logs).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from core.links import RunPlace, logs_url
from tools.runs import pods as podfacts
from tools.runs.cluster import Gone
from tools.status.model import is_true
from tools.status.phase import CONTAINER

POLL_S = 2.0
ENDING_POLLS = 5
EX_NOINPUT = 66


class LogSource(Protocol):
    def pods(self, run: str) -> list[dict]: ...
    def jobset(self, run: str) -> dict | None: ...
    def log(self, pod: str, container: str, tail: int | None = None) -> str: ...
    def follow(self, pod: str, container: str, since_seconds: int | None = None) -> Iterator[str]: ...


@dataclass(frozen=True)
class Target:
    """Whose log: the run, where it lives (for the Cloud Logging link), its shape, which process(es)."""

    run: str
    place: RunPlace
    hosts_per_slice: int
    processes: int
    which: str = "0"  # a process index, or "all"

    def indexes(self) -> list[int]:
        return list(range(self.processes)) if self.which == "all" else [int(self.which)]

    def prefix(self, index: int) -> str:
        return f"[{index}] " if self.which == "all" else ""


def which_problem(which: str, processes: int) -> str:
    """Why `--pod` is not a process of the run, or ''."""
    if which == "all" or (which.isdigit() and int(which) < processes):
        return ""
    return f"--pod {which!r} is not a process of the run; allowed: 0..{processes - 1} or all"


def gone_message(target: Target) -> str:
    return (f"logs: run {target.run} has no pods in the cluster (it ended and its pods were removed, it was "
            f"deleted or replaced, or it has not started); its logs are in Cloud Logging:\n  {logs_url(target.place)}")


def show(source: LogSource, target: Target, out: Callable[[str], None], tail: int | None = None) -> int:
    """Print the current log of the chosen process(es) once."""
    newest = podfacts.newest_by_index(source.pods(target.run), target.hosts_per_slice)
    if not newest:
        out(gone_message(target))
        return 0
    for index in target.indexes():
        pod = newest.get(index)
        if pod is None:
            out(f"logs: process {index} of run {target.run} has no pod now (pods: "
                f"{', '.join(map(str, newest)) or 'none'})")
            continue
        if not podfacts.started(pod):
            out(f"{target.prefix(index)}--- pod {podfacts.name(pod)} has not started its trainer yet "
                f"({(pod.get('status') or {}).get('phase', 'Pending')})")
            continue
        try:
            text = source.log(podfacts.name(pod), CONTAINER, tail)
        except Gone:
            out(f"{target.prefix(index)}--- pod {podfacts.name(pod)} is gone; its log is in Cloud Logging: "
                f"{logs_url(target.place, pod=podfacts.name(pod))}")
            continue
        for line in text.splitlines():
            out(target.prefix(index) + line)
    return 0


def run_end(jobset: Mapping | None) -> str:
    """'succeeded', 'failed', 'deleted', or '' while the run goes on."""
    if jobset is None:
        return "deleted"
    for kind, word in (("Completed", "succeeded"), ("Failed", "failed")):
        if is_true(jobset, kind):
            return word
    return ""


class Follower:
    """Follows one process of a run across its pods (restarts), printing each line."""

    def __init__(self, source: LogSource, target: Target, index: int, out: Callable[[str], None],
                 poll: float = POLL_S, sleep: Callable[[float], None] = time.sleep):
        self.source, self.target, self.index, self.out = source, target, index, out
        self.poll, self.sleep = poll, sleep
        self.read: set[str] = set()
        self.last_code: int | None = None  # how the last pod read ended (0: its trainer finished)

    def say(self, text: str) -> None:
        self.out(f"{self.target.prefix(self.index)}--- {text}")

    def next_pod(self) -> tuple[Mapping | None, str]:
        """(the newest unread, started pod of this process, or None; the run's end, '' while it goes on)."""
        pods = self.source.pods(self.target.run)
        pod = podfacts.newest_by_index(pods, self.target.hosts_per_slice).get(self.index)
        fresh = pod if pod is not None and podfacts.name(pod) not in self.read and podfacts.started(pod) else None
        return fresh, run_end(self.source.jobset(self.target.run)) if fresh is None else ""

    def run(self) -> None:
        waiting = False
        while True:
            pod, end = self.next_pod()
            if pod is None:
                if end:
                    self.say(f"run {self.target.run} {end}")
                    return
                if not waiting and not self.read:
                    self.say(f"waiting for process {self.index}'s pod to start")
                elif not waiting and self.last_code != 0:
                    self.say("waiting for the next pod of this process (the run restarts)")
                waiting = True
                self.sleep(self.poll)
                continue
            waiting = False
            self.stream(pod)

    def stream(self, pod: Mapping) -> None:
        pod_name = podfacts.name(pod)
        self.read.add(pod_name)
        if len(self.read) > 1:
            self.say(f"pod {pod_name} (attempt {podfacts.attempt(pod)})")
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, args=(pod_name, lines, None), daemon=True).start()
        last_line = time.time()
        while True:
            try:
                item = lines.get(timeout=self.poll)
            except queue.Empty:
                if self._pod_done(pod_name):
                    self._drain(lines)
                    break
                continue
            if item is _END:
                break
            if item is _BROKEN:
                if self._pod_done(pod_name):
                    break
                self.say(f"log stream of {pod_name} broke; attaching again")
                since = int(time.time() - last_line) + 1
                threading.Thread(target=self._pump, args=(pod_name, lines, since), daemon=True).start()
                continue
            if isinstance(item, Gone):
                self.say(f"pod {pod_name} is gone; the rest of its log is in Cloud Logging: "
                         f"{logs_url(self.target.place, pod=pod_name)}")
                return
            last_line = time.time()
            self.out(self.target.prefix(self.index) + item)
        self.say(self._ending(pod_name))

    def _pump(self, pod_name: str, lines: queue.Queue, since_seconds: int | None) -> None:
        try:
            for line in self.source.follow(pod_name, CONTAINER, since_seconds):
                lines.put(line)
            lines.put(_END)
        except Gone as err:
            lines.put(err)
        except Exception:  # pylint: disable=broad-except  # the reader decides from the pod's state
            lines.put(_BROKEN)

    def _drain(self, lines: queue.Queue) -> None:
        """What the stream had delivered before its pod ended."""
        while True:
            try:
                item = lines.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, str):
                self.out(self.target.prefix(self.index) + item)

    def _current(self, pod_name: str) -> Mapping | None:
        return next((p for p in self.source.pods(self.target.run) if podfacts.name(p) == pod_name), None)

    def _pod_done(self, pod_name: str) -> bool:
        """Whether the streamed pod ended, went, or a newer pod replaced it (a stream may outlive its pod)."""
        pod = self._current(pod_name)
        if pod is None or podfacts.ended(pod):
            return True
        newest = podfacts.newest_by_index(self.source.pods(self.target.run), self.target.hosts_per_slice)
        return podfacts.name(newest.get(self.index) or pod) != pod_name

    def _ending(self, pod_name: str) -> str:
        """How the pod ended; its status may lag its log's end by a moment (the kubelet reports it next)."""
        for _ in range(ENDING_POLLS):
            pod = self._current(pod_name)
            if pod is None:
                self.last_code = None
                return f"pod {pod_name} is gone"
            end = podfacts.terminated(pod)
            if end is not None:
                self.last_code = end.get("exitCode")
                why = f", {end['reason']}" if end.get("reason") else ""
                return f"pod {pod_name} ended: exit code {end.get('exitCode')}{why}"
            self.sleep(self.poll)
        self.last_code = None
        return f"pod {pod_name}'s log ended; the pod is still {(pod.get('status') or {}).get('phase', 'there')}"


_END = object()
_BROKEN = object()


def follow(source: LogSource, target: Target, out: Callable[[str], None], poll: float = POLL_S) -> int:
    """Follow the chosen process(es) until the run ends; every line printed through `out`."""
    if not source.pods(target.run) and run_end(source.jobset(target.run)) == "deleted":
        out(gone_message(target))
        return 0
    lock = threading.Lock()

    def locked(line: str) -> None:
        with lock:
            out(line)

    followers = [Follower(source, target, i, locked, poll) for i in target.indexes()]
    threads = [threading.Thread(target=f.run, daemon=True) for f in followers]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(timeout=0.5)
    return 0


def processes_of(pods: Sequence[Mapping], hosts_per_slice: int) -> list[int]:
    return sorted(podfacts.newest_by_index(pods, hosts_per_slice))
