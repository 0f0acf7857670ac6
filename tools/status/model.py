"""Where a run is: its phase, pods, restarts, progress, ETA, goodput and money, from plain objects.

Pure: the run's JobSet (jobset.x-k8s.io/v1alpha2), its Kueue Workload (kueue.x-k8s.io/v1beta2) and
that Workload's ProvisioningRequests (autoscaling.x-k8s.io/v1), its pods, its progress record
(trainers/*/progress.py) and the stack's facts in; one `RunStatus` out. tools/status/sources.py reads the
objects from the cluster and the bucket.

What the fields mean, as the controllers write them:
- JobSet v0.12.0 conditions Completed, Failed (reasons FailJobSetFailurePolicyAction,
  ReachedMaxRestarts, FailedJobs; message "... (first failed job: <job>)"), Suspended and
  RestartingJobSet (True while a failure-policy restart recreates the Jobs); status.restarts counts
  every restart, status.restartsCountTowardsMax those that count towards
  spec.failurePolicy.maxRestarts (RestartJobSetAndIgnoreMaxRestarts ones do not); replicatedJobsStatus
  .ready: child Jobs whose pods are ready. (kubernetes-sigs/jobset v0.12.0
  api/jobset/v1alpha2/jobset_types.go, pkg/constants/constants.go, pkg/controllers/failure_policy.go)
- Kueue v0.19.2 Workload conditions QuotaReserved (False with reason WaitingForQuota, ...),
  Admitted (quota reserved and every admission check Ready), Evicted, Finished; spec.active false
  deactivates it; status.admission.podSetAssignments[].flavors names the ResourceFlavor it was
  admitted on (here `<namespace>-<pool>`, core/contract.py SchedulingContract.flavor); status.admissionChecks[].state is Pending, Ready, Retry or Rejected.
  The provisioning check's ProvisioningRequest is owned by the Workload and named
  <workload>-<check>-<attempt>; its conditions are Accepted, Provisioned, Failed, BookingExpired and
  CapacityRevoked. (kubernetes-sigs/kueue v0.19.2 apis/kueue/v1beta2/workload_types.go,
  admissioncheck_types.go, pkg/controller/admissionchecks/provisioning/{provisioning,controller}.go)
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

PROGRESS_SCHEMA = 1
# The progress record's keys and their types (trainers/progress.py documents the format).
_NUM = (int, float)
PROGRESS_KEYS: dict[str, tuple] = {
    "schema": (int,), "trainer": (str,), "step": (int,), "total_steps": (int,),
    "started_at": (str,), "updated_at": (str,), "starts": (int,),
    "train_seconds": _NUM, "restore_seconds": _NUM, "redone_steps": (int,),
}
PROGRESS_OPTIONAL: dict[str, tuple] = {
    "run": (str,), "tokens_per_s": _NUM, "loss": _NUM, "eval_loss": _NUM, "eval_step": (int,),
    "checkpoint_step": (int,), "attempt_started_at": (str,),
}
PR_CONDITIONS = ("Failed", "CapacityRevoked", "BookingExpired", "Provisioned", "Accepted")


class ProgressError(ValueError):
    """A progress record that is not in the trainers' format: names the key, the value and what is allowed."""

    def __init__(self, key: str, value: object, allowed: str):
        self.key, self.value, self.allowed = key, value, allowed
        super().__init__(f"progress record key {key!r}: {value!r} is not allowed; allowed: {allowed}")


def validate_progress(record: object) -> dict:
    """The record, checked against the trainers' schema-1 format."""
    if not isinstance(record, Mapping):
        raise ProgressError("(record)", type(record).__name__, "a JSON object")
    if record.get("schema") != PROGRESS_SCHEMA:
        raise ProgressError("schema", record.get("schema"), str(PROGRESS_SCHEMA))
    for key, types in PROGRESS_KEYS.items():
        if not isinstance(record.get(key), types) or isinstance(record.get(key), bool):
            raise ProgressError(key, record.get(key), " or ".join(t.__name__ for t in types))
    for key, types in PROGRESS_OPTIONAL.items():
        if record.get(key) is not None and not isinstance(record[key], types):
            raise ProgressError(key, record[key], " or ".join(t.__name__ for t in types) + " or null")
    for key in ("started_at", "updated_at"):
        try:
            parse_time(record[key])
        except ValueError:
            raise ProgressError(key, record[key], "a UTC ISO 8601 time") from None
    if not 0 <= record["step"] <= record["total_steps"]:
        raise ProgressError("step", record["step"], f"0..total_steps ({record['total_steps']})")
    return dict(record)


def parse_time(text: str) -> float:
    """Seconds since the epoch of an ISO 8601 time (Kubernetes writes them with a trailing Z)."""
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def condition(obj: Mapping | None, kind: str) -> dict | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or ():
        if c.get("type") == kind:
            return c
    return None


def is_true(obj: Mapping | None, kind: str) -> bool:
    c = condition(obj, kind)
    return bool(c) and c.get("status") == "True"


@dataclass(frozen=True)
class Rung:
    """Where a run's pods are (or would be): the pool, its capacity, its place on the run's ladder."""

    index: int  # 1-based
    of: int
    pool: str
    capacity: str


@dataclass
class RunStatus:
    run: str
    phase: str  # waiting for quota | waiting for capacity | admitted | running | restarting | succeeded | failed | suspended | starting
    detail: str = ""
    rung: Rung | None = None
    slices_ready: int = 0
    slices: int = 0
    pods_ready: int = 0
    pods: int = 0
    restarts: int = 0
    restarts_counted: int = 0
    max_restarts: int | None = None
    step: int | None = None
    total_steps: int | None = None
    tokens_per_s: float | None = None
    loss: float | None = None
    eval_loss: float | None = None
    checkpoint_step: int | None = None
    eta_seconds: float | None = None
    # None: ended, or not known (running without a record); False: with since when and why.
    progressing: bool | None = None
    stalled_since: str = ""
    stalled_why: str = ""
    wall_seconds: float = 0.0
    measured_from: str = ""  # the interval's start (tools/status/clock.py)
    goodput: float | None = None
    chips: int = 0
    chip_hours: float = 0.0
    usd_low: float = 0.0
    usd_high: float = 0.0
    price_note: str = ""
    exit_code: int | None = None
    reason: str = ""
    submitted_at: str = ""
    progress_problem: str = ""
    notes: list[str] = field(default_factory=list)
    export: str = ""  # where its export is and whether it is complete (a run with `export:`)
    evaluation: str = ""  # eval.json's figures, the base model's beside them
    links: dict[str, str] = field(default_factory=dict)  # the run's console page and Cloud Logging query (core/links.py)

    def as_dict(self) -> dict:
        return asdict(self)
