"""`make status STACK= [RUN=] WAIT=1 [WAIT_TIMEOUT=<seconds>]`: wait until the run ends, printing each
change of its phase; every run of the stack without RUN.

Exit codes (documented in the README; sysexits where one fits):

    0   the run succeeded (every run, without RUN)
    3   the run failed: why, in the trainer's words where it says, and what to do next (tools/runs/explain.py)
    4   the run is suspended (`make cancel`; `make resume` starts it again)
    66  the stack has nothing deployed, or no such run (as `make status`)
    69  the cluster cannot be reached (at the start; while waiting, once it has not answered for
        UNREACHABLE_GRACE_S on end)
    75  EX_TEMPFAIL: not admitted within WAIT_TIMEOUT (still waiting for quota or capacity, or not
        submitted); retry later. Without WAIT_TIMEOUT it waits as long as it takes.
    78  the stack file is invalid, or the kubeconfig has no context for the stack's cluster (as `make status`)

The phases are `make status`'s (tools/status/phase.py), read the same way (tools/status/table.py `rows`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from tools.runs import pods as podfacts
from tools.runs.cluster import ClusterUnreachable, Gone
from tools.runs.explain import explain, failure_inputs
from tools.status.model import RunStatus
from tools.status.phase import CONTAINER
from tools.status.sources import NotDeployed
from tools.status.table import rows as status_rows

EX_OK, EX_FAILED, EX_SUSPENDED = 0, 3, 4
EX_NOINPUT, EX_UNAVAILABLE, EX_TEMPFAIL = 66, 69, 75
POLL_S = 10.0
UNREACHABLE_GRACE_S = 300.0
ENDED = {"succeeded": EX_OK, "failed": EX_FAILED, "suspended": EX_SUSPENDED}
# Phases before Kueue admits the run, or before its pods get nodes: what WAIT_TIMEOUT bounds.
NOT_ADMITTED = ("not submitted", "waiting for quota", "waiting for capacity", "starting")
WITHDRAWN_DETAIL = "suspend: true in the stack file (its JobSet is not declared); `make resume` starts it again"
LOG_TAIL_LINES = 50


class Probe(Protocol):
    def rows(self) -> list[RunStatus]: ...
    def explain(self, row: RunStatus) -> list[str]: ...


def _stamp(now: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))


def suspended_in_file(rows: Sequence[RunStatus], withdrawn: set[str]) -> list[RunStatus]:
    """The rows, a run the stack file suspends and leaves undeclared (a Kueue run) shown as suspended."""
    for row in rows:
        if row.phase == "not submitted" and row.run in withdrawn:
            row.phase, row.detail = "suspended", WITHDRAWN_DETAIL
    return list(rows)


def outcome(rows: Sequence[RunStatus]) -> int | None:
    """The exit code once every run has ended; None while one goes on."""
    if not rows or any(r.phase not in ENDED for r in rows):
        return None
    codes = {ENDED[r.phase] for r in rows}
    return EX_FAILED if EX_FAILED in codes else EX_SUSPENDED if EX_SUSPENDED in codes else EX_OK


def wait(probe: Probe, out: Callable[[str], None], timeout: float | None = None, poll: float = POLL_S,
         unreachable_grace: float = UNREACHABLE_GRACE_S, clock: Callable[[], float] = time.time,
         sleep: Callable[[float], None] = time.sleep) -> int:
    """Poll the runs until each has ended; print every change of phase; return the exit code."""
    start, shown, unreachable_since = clock(), {}, None
    while True:
        try:
            rows = probe.rows()
        except NotDeployed as err:
            out(f"wait: nothing deployed: {err}")
            return EX_NOINPUT
        except ClusterUnreachable as err:
            now = clock()
            if not shown:  # never reached: nothing to wait for
                out(f"wait: the cluster cannot be reached: {err}")
                return EX_UNAVAILABLE
            if unreachable_since is None:
                unreachable_since = now
                out(f"{_stamp(now)} the cluster does not answer ({err}); trying again")
            if now - unreachable_since >= unreachable_grace:
                out(f"wait: the cluster cannot be reached since {_stamp(unreachable_since)}: {err}")
                return EX_UNAVAILABLE
            sleep(poll)
            continue
        unreachable_since, now = None, clock()
        for row in rows:
            seen = (row.phase, row.detail)
            if shown.get(row.run) != seen:
                shown[row.run] = seen
                out(f"{_stamp(now)} {row.run}: {row.phase}" + (f" ({row.detail})" if row.detail else ""))
        code = outcome(rows)
        if code is not None:
            for row in rows:
                if row.phase == "failed":
                    for line in probe.explain(row):
                        out(line)
            return code
        late = [r.run for r in rows if r.phase in NOT_ADMITTED]
        if timeout is not None and now - start >= timeout and late:
            out(f"wait: not admitted within {timeout:.0f} s: {', '.join(late)} (still "
                f"{'; '.join(f'{r.run}: {r.phase}' for r in rows if r.run in late)}); `make status` shows why")
            return EX_TEMPFAIL
        sleep(poll)


class ClusterProbe:
    """The runs' rows from the cluster, as `make status` computes them, and a failed run's explanation."""

    def __init__(self, cluster, facts: Mapping, runs: Sequence[str], withdrawn: set[str], links: Mapping):
        self.cluster, self.facts, self.runs, self.withdrawn, self.links = cluster, facts, list(runs), withdrawn, links
        self.objects: dict = {}

    def rows(self) -> list[RunStatus]:
        self.objects = self.cluster.snapshot()
        found = status_rows({r: self.facts[r] for r in self.runs}, self.objects, _NoRecords(), time.time())
        return suspended_in_file(found, self.withdrawn)

    def explain(self, row: RunStatus) -> list[str]:
        run_pods = [p for p in self.objects.get("pods", ())
                    if ((p.get("metadata") or {}).get("labels") or {}).get("jobset.sigs.k8s.io/jobset-name") == row.run]
        failed = podfacts.failed_pods(run_pods)
        pod = failed[0] if failed else None
        code, container_reason = failure_inputs(pod)
        tail = ""
        if pod is not None:
            try:
                tail = self.cluster.log(podfacts.name(pod), CONTAINER, LOG_TAIL_LINES)
            except (Gone, ClusterUnreachable):
                tail = ""
        return explain(row.run, row.reason, row.detail, code if code is not None else row.exit_code,
                       container_reason, tail, (self.links.get(row.run) or {}).get("logs", ""))


class _NoRecords:
    """Waiting needs the phase only: no progress record is read."""

    def read(self, run: str, prefix: str | None = None) -> tuple[None, str]:
        return None, ""

    def export(self, prefix: str) -> tuple[str, str]:
        return "", ""
