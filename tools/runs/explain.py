"""What a failed run's end means, and what to do next. Pure: the run's status, its failed pod's trainer
state and the last lines of that pod's log in; lines for a person out.

The exit codes are the trainers' (trainers/exit_codes.py): 78, a configuration problem a restart
can't fix, which the JobSet's failure policy turns into a failed run at once (manifests/jobset.py),
the trainer's own message being its last `configuration error: ...` line; 143, stopped by SIGTERM
after writing a checkpoint (preemption, maintenance, a deleted pod). A container the kernel killed
for memory has the reason `OOMKilled` and exit code 137, 128 + SIGKILL
(https://kubernetes.io/docs/tasks/configure-pod-container/assign-memory-resource/#exceed-a-container-s-memory-limit).
JobSet's reasons are those of v0.12.0 (tools/status/model.py): `FailJobSetFailurePolicyAction` (a
rule failed it), `ReachedMaxRestarts` (its restarts ran out).
"""

from __future__ import annotations

from collections.abc import Mapping

from tools.runs.pods import terminated
from trainers.exit_codes import CONFIG_ERROR, EXPORT_FAILED, TERMINATED

OOM_KILLED = "OOMKilled"
SIGKILL_EXIT = 137
# What both trainers print before exiting 78 (trainers/gemma_jax/train.py, trainers/trl_gpu/sft.py).
CONFIG_ERROR_PREFIX = "configuration error:"
MAX_RESTARTS_REASON = "ReachedMaxRestarts"
KUEUE_DEACTIVATED = "Kueue deactivated the run"


def config_problem(log_tail: str) -> str:
    """The trainer's own words for its configuration error: the last such line of its log, or ''."""
    found = [line.strip() for line in log_tail.splitlines() if CONFIG_ERROR_PREFIX in line]
    return found[-1][found[-1].index(CONFIG_ERROR_PREFIX):] if found else ""


def _last_lines(log_tail: str, count: int = 5) -> list[str]:
    return [line for line in log_tail.splitlines() if line.strip()][-count:]


def meaning(code: int | None, reason: str) -> tuple[str, str]:
    """(what the trainer's end means, what to do next) by its exit code and its container's reason."""
    if reason == OOM_KILLED:
        return (f"killed for memory ({OOM_KILLED}, exit code {code}): the container went over its memory limit, "
                "or the node ran out",
                "lower the run's memory (a smaller --batch_size or --maxlen in its args), or a pool with more "
                "memory per node; `make plan` prints each run's requests against the node's allocatable")
    if code == CONFIG_ERROR:
        return ("exit code 78: a configuration problem a restart can't fix, so the JobSet failed the run at once "
                "instead of restarting it",
                "fix it in the stack file (the run's args, data or image), check with `make plan`, then `make up`: "
                "the changed run is replaced and resumes from its checkpoints")
    if code == TERMINATED:
        return ("exit code 143: stopped by SIGTERM after writing a checkpoint (preemption, maintenance, a deleted "
                "pod, a suspended run); each such stop is a restart",
                "nothing is lost: the run resumes from that checkpoint when it starts again")
    if code == EXPORT_FAILED:
        return ("exit code 73: training succeeded, but its export (`export:`) could not be written; the checkpoints "
                "are untouched, and each restart resumed from the final one and tried the export again",
                "read why at the end of its log (`make logs`), fix it, then `make up`: the run resumes from its "
                "final checkpoint and exports")
    if code == SIGKILL_EXIT:
        return ("exit code 137: killed by SIGKILL (after its grace period, or by the kernel's OOM killer)",
                "check the node's memory and the pod's events: `make inspect`")
    if code is None:
        return ("no exit code is recorded (its pods are gone, or it never started)",
                "`make inspect` gathers the run's objects and events")
    return (f"exit code {code}: the trainer ended with an error",
            "read the end of its log (`make logs`); `make inspect` gathers the run's objects and events")


def explain(run: str, reason: str, detail: str, code: int | None, container_reason: str, log_tail: str,
            logs_link: str = "") -> list[str]:
    """The lines a failed run's status adds: why it ended, the trainer's words, what to do next."""
    what, next_step = meaning(code, container_reason)
    lines = [f"run {run} failed" + (f": {detail}" if detail else "")]
    if detail.startswith(KUEUE_DEACTIVATED):  # tools/status/phase.py: Kueue gave up on admitting it
        lines += ["  why              Kueue deactivated its Workload: a queued rung's ProvisioningRequest failed "
                  "through its retries, or someone deactivated it",
                  "  next             `make inspect` shows the ProvisioningRequests and their conditions; change the "
                  "run's ladder or capacity and `make up` (a changed run is replaced and resumes from its checkpoints)"]
        return lines
    if reason == MAX_RESTARTS_REASON or MAX_RESTARTS_REASON in detail:
        lines.append("  why              its restarts ran out (maxRestarts); the last one ended with "
                     + what.split(":")[0])
        next_step = ("look at why the pods kept failing (`make logs`, `make inspect`), then raise the run's "
                     "maxRestarts or fix the cause, and `make up`")
    else:
        lines.append(f"  why              {what}")
    problem = config_problem(log_tail) if code == CONFIG_ERROR else ""
    if problem:
        lines.append(f"  the trainer said {problem}")
    elif log_tail.strip():
        lines += ["  last log lines"] + [f"    {line}" for line in _last_lines(log_tail)]
    elif logs_link:
        lines.append(f"  its log          in Cloud Logging: {logs_link}")
    lines.append(f"  next             {next_step}")
    return lines


def failure_inputs(pod: Mapping | None) -> tuple[int | None, str]:
    """(exit code, container reason) of a failed pod's trainer; (None, '') without one."""
    end = terminated(pod) if pod is not None else None
    if not end:
        return None, ""
    return end.get("exitCode"), end.get("reason") or ""
