"""A run's clock: the one interval its wall time, goodput and money are measured over, and whether it
is progressing (an ETA) or not (since when, and why).

The interval starts at the run's earliest known moment: its JobSet's submission, or the trainer's
first start where the progress record goes back further. The record lives in the bucket beside the
checkpoints and outlives a JobSet: an edit that replaces the JobSet (a new creationTimestamp)
resumes the same run from its checkpoint, and the record keeps its first start and all of its
training time. Measuring wall time from the new JobSet while the record counts from the first
would put days of training (and of billing) over an hour of wall time; both count from one start.
What happened before the earliest JobSet still in the cluster (its queueing) is unknown and left
out, and said. The interval ends at the JobSet's Completed or Failed condition, else now.

The billed part of the interval starts at the earlier of the trainer's first start and the start
of the oldest run pod now on a node (nodes are held through restarts and restores); the time
before it (queueing, node creation) is not counted.

A run is progressing only while it is running and its trainer has written the record since its
pods' trainers last started: the trainers write their first record of an attempt at its first
trained step (trainers/*/progress.py `first_step`), so a record older than the trainer container's
start means a restart that has not trained a step yet (restore, compilation). Every other
unfinished phase (waiting for quota or capacity, admitted, starting, restarting, suspended) is not
progressing: no ETA, but since when (the record's last write, or the submission when the trainer
never wrote one) and why (the phase, what the controllers say, and since when they say it).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tools.status.model import condition, parse_time
from tools.status.phase import CONTAINER

# The API server's and the nodes' clocks (Compute Engine VMs keep theirs by Google's NTP service
# through the metadata server, https://cloud.google.com/compute/docs/instances/configure-ntp) differ
# by far less than this; the record's times are whole seconds. A trainer restarted within it of its
# previous attempt's last write is not told apart (it shows as progressing until it writes again).
SKEW_S = 5.0
ENDED = ("succeeded", "failed")
# The condition whose lastTransitionTime says since when a phase holds (JobSet v0.12.0, Kueue v0.19.2
# tools/status/model.py): (object, condition type).
PHASE_SINCE = {
    "restarting": ("jobset", "RestartingJobSet"),
    "suspended": ("jobset", "Suspended"),
    "waiting for quota": ("workload", "QuotaReserved"),
    "waiting for capacity": ("workload", "Admitted"),
}


def iso(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Interval:
    """[start, end] of the run, and where in it billing starts (None: nothing billed yet)."""

    start: float
    end: float
    billed_from: float | None
    note: str = ""  # why the interval does not start at the JobSet's submission

    @property
    def wall_seconds(self) -> float:
        return round(max(0.0, self.end - self.start), 1)

    @property
    def billed_seconds(self) -> float:
        return max(0.0, self.end - self.billed_from) if self.billed_from is not None else 0.0


def end_of(jobset: Mapping, now: float) -> float:
    for kind in ("Completed", "Failed"):
        c = condition(jobset, kind)
        if c and c.get("status") == "True" and c.get("lastTransitionTime"):
            return parse_time(c["lastTransitionTime"])
    return now


def _pod_starts(pods: Sequence[Mapping]) -> list[float]:
    """When each run pod now on a node started."""
    return [parse_time(p["status"]["startTime"]) for p in pods
            if (p.get("spec") or {}).get("nodeName") and (p.get("status") or {}).get("startTime")]


def interval(jobset: Mapping, pods: Sequence[Mapping], record: Mapping | None, now: float) -> Interval:
    """The one interval wall time, goodput and money are measured over (the module's docstring)."""
    end = end_of(jobset, now)
    created = (jobset.get("metadata") or {}).get("creationTimestamp")
    submitted = parse_time(created) if created else None
    first_start = parse_time(record["started_at"]) if record is not None else None
    starts = [t for t in (submitted, first_start) if t is not None]
    start = min(starts) if starts else end
    note = ""
    if submitted is not None and first_start is not None and first_start < submitted - SKEW_S:
        note = (f"the JobSet was re-created at {created}; the run's record goes back to its first start at "
                f"{record['started_at']}: wall time, goodput and money count from there (queueing before it unknown)")
    billed = _pod_starts(pods) + ([first_start] if first_start is not None else [])
    return Interval(start=start, end=end, billed_from=min(billed) if billed else None, note=note)


def trainer_started(pod: Mapping) -> float | None:
    """When the pod's trainer container last started: its running state, else the pod's start."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or ():
        running = (cs.get("state") or {}).get("running") or {}
        if cs.get("name") == CONTAINER and running.get("startedAt"):
            return parse_time(running["startedAt"])
    started = (pod.get("status") or {}).get("startTime")
    return parse_time(started) if started and (pod.get("spec") or {}).get("nodeName") else None


def _phase_since(phase: str, jobset: Mapping, workload: Mapping | None) -> str:
    kind = PHASE_SINCE.get(phase)
    if kind is None:
        return ""
    c = condition(jobset if kind[0] == "jobset" else workload, kind[1]) or {}
    return c.get("lastTransitionTime", "")


@dataclass(frozen=True)
class Progress:
    """Whether the run trains now: True, False (with since when and why), None (ended, or not known)."""

    progressing: bool | None
    since: str = ""
    why: str = ""


def progress(phase: str, detail: str, jobset: Mapping, workload: Mapping | None, pods: Sequence[Mapping],
             record: Mapping | None) -> Progress:
    """Whether the run is progressing (the module's docstring)."""
    if phase in ENDED:
        return Progress(None)
    last = record["updated_at"] if record is not None else ""
    if phase == "running":
        if record is None:
            return Progress(None)
        restarted = [t for t in map(trainer_started, pods) if t is not None]
        if restarted and max(restarted) > parse_time(last) + SKEW_S:
            return Progress(False, last, f"its trainer restarted at {iso(max(restarted))} and has trained no step "
                                         "since (restoring its checkpoint, compiling)")
        return Progress(True)
    since = last or (jobset.get("metadata") or {}).get("creationTimestamp", "")
    state_since = _phase_since(phase, jobset, workload)
    why = phase + (f" since {state_since}" if state_since else "") + (f": {detail}" if detail else "")
    return Progress(False, since, why)
