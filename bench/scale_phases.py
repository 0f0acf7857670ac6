"""The phases of one scale case (bench/scale.py), from when each Job and pod was seen and each pod bound.

A run's JobSet becomes Jobs (the JobSet manager), each Job becomes pods (the controller-manager's Job
controller, through JobSet's pod webhooks), and each pod is bound to a node (kube-scheduler). The
phases follow one another per slice but overlap across slices, so each is given two ways: the time
from the end of the one before to its own end (its share of the wall time), and its own rate over
its own span. What tells creation from scheduling apart:

- `schedule_latency`: per pod, bound minus created. When the scheduler keeps up it stays small
  whatever the wall time; when pods pile up unbound, it grows.
- `bound_per_s_with_backlog`: pods bound per second counted only while some created pod waited
  unbound, the scheduler's rate when it had work, which is what kube-scheduler's scheduler_perf
  measures (its pods are all created before it counts).
- `follower_wait`: per slice, from its leader pod (completion index 0) bound to its first other pod
  created. With JobSet's exclusive placement by pod affinity, the pod webhook refuses a follower
  until its leader is scheduled ("leader pod not yet scheduled, not creating follower pod. this is an
  expected, transient error", sigs.k8s.io/jobset v0.12.0 pkg/webhooks/pod_webhook.go ValidateCreate),
  and the Job controller then retries that Job after a backoff (`FailedCreate` events count them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def _quantiles(values: list[float]) -> dict:
    if not values:
        return {"p50": None, "p95": None, "max": None}
    values = sorted(values)
    pick = lambda q: round(values[min(len(values) - 1, int(q * len(values)))], 2)  # noqa: E731
    return {"p50": pick(0.5), "p95": pick(0.95), "max": round(values[-1], 2)}


def _rate(count: int, first: float | None, last: float | None) -> float | None:
    return round(count / (last - first), 1) if count > 1 and first is not None and last and last > first else None


def backlog_rate(created: Iterable[float], bound: Iterable[float]) -> tuple[float | None, float]:
    """Pods bound per second while at least one created pod was unbound, and the seconds that was so."""
    events = sorted([(t, 1) for t in created] + [(t, -1) for t in bound], key=lambda e: (e[0], -e[1]))
    waiting, since, busy, bound_busy = 0, 0.0, 0.0, 0
    for at, change in events:
        if waiting > 0:
            busy += at - since
        if change < 0 and waiting > 0:
            bound_busy += 1
        waiting += change
        since = at
    return (round(bound_busy / busy, 1) if busy > 0 else None), round(busy, 1)


def phases(jobs: Mapping[str, object], pods: Mapping[str, object], t0: float) -> dict:
    """The case's phases from the watches' times (bench/scale_watch.py PodTimes), in seconds after `t0`,
    the JobSet's creation."""
    job_times = sorted(j.created - t0 for j in jobs.values() if j.created)
    created = sorted(p.created - t0 for p in pods.values() if p.created)
    bound = sorted(p.bound - t0 for p in pods.values() if p.bound)
    jobs_done = job_times[-1] if job_times else None
    created_done = created[-1] if created else None
    bound_done = bound[-1] if len(bound) == len(pods) and bound else None
    rate, busy = backlog_rate(created, bound)
    return {
        "jobs": len(job_times), "pods": len(pods),
        "jobset_to_jobs_s": round(jobs_done, 2) if jobs_done is not None else None,
        "jobs_per_s": _rate(len(job_times), 0.0, jobs_done),
        "jobs_to_pods_created_s": round(created_done - (jobs_done or 0.0), 2) if created_done is not None else None,
        "pods_created_per_s": _rate(len(created), created[0] if created else None, created_done),
        "created_to_bound_s": round(bound_done - created_done, 2) if bound_done is not None else None,
        "pods_bound_per_s": _rate(len(bound), bound[0] if bound else None, bound_done),
        "bound_per_s_with_backlog": rate, "backlog_s": busy,
        "schedule_latency": _quantiles([p.bound - p.created for p in pods.values() if p.bound and p.created]),
        "leaders_bound_s": _last_leader_bound(pods, t0),
        "follower_wait": _quantiles(follower_waits(pods)),
    }


def _last_leader_bound(pods: Mapping[str, object], t0: float) -> float | None:
    leaders = [p.bound - t0 for p in pods.values() if p.leader and p.bound]
    return round(max(leaders), 2) if leaders else None


def follower_waits(pods: Mapping[str, object]) -> list[float]:
    """Per slice: from its leader bound to its first follower created (negative: created before)."""
    leader_bound, first_follower = {}, {}
    for p in pods.values():
        if p.leader and p.bound:
            leader_bound[p.job] = p.bound
        elif not p.leader and p.created:
            first_follower[p.job] = min(first_follower.get(p.job, p.created), p.created)
    return [first_follower[j] - leader_bound[j] for j in leader_bound if j in first_follower]
