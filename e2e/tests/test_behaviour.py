"""What the real JobSet, Job and Kueue controllers do with the runs' failure policy, queues and priorities.

On the scenario control plane (conftest.py `queued`: the shipped
`tpu-queued` stack, its own runs removed); each test submits variants of
its runs and removes them after.
"""

from __future__ import annotations

from e2e.harness.kube import wait_for
from e2e.harness.observe import wait_bound
from e2e.harness.stages import EXIT_ON_SIGTERM_ANNOTATION, FAIL_EXIT_CODE_ANNOTATION, FAIL_LABEL
from e2e.tests.scenario import jobset_condition, jobset_status, pod_template, variant

SINGLE_HOST_RUN = "gemma3-single-host"
TIMEOUT = 120.0


def _pod_names(kube, jobset) -> list[str]:
    return [p.pod for p in wait_bound(kube, jobset, TIMEOUT)]


def test_a_pod_exiting_78_fails_its_jobset_without_a_restart(queued, submitted):
    _, kube, runs = queued
    run = submitted(variant(runs[SINGLE_HOST_RUN], "exit-78"))
    pod = _pod_names(kube, run)[0]
    ns = run["metadata"]["namespace"]
    # kwok's chaos stage ends the running container with the annotated exit code.
    kube.patch("v1", "Pod", pod, ns, {"metadata": {"annotations": {FAIL_EXIT_CODE_ANNOTATION: "78"},
                                                   "labels": {FAIL_LABEL: "true"}}})
    failed = wait_for("JobSet Failed", lambda: jobset_condition(kube, run, "Failed"), TIMEOUT,
                      explain=lambda: str(jobset_status(kube, run)))
    status = jobset_status(kube, run)
    assert status.get("restarts", 0) == 0, status
    # The stacks' ConfigError rule (action FailJobSet) decided it, not the restart budget running out.
    assert failed["reason"] == "FailJobSetFailurePolicyAction", failed


def test_an_evicted_pod_restarts_its_jobset_outside_the_restart_budget(queued, submitted):
    _, kube, runs = queued
    run = submitted(variant(runs[SINGLE_HOST_RUN], "evicted"))
    pod = _pod_names(kube, run)[0]
    ns = run["metadata"]["namespace"]
    # The Eviction API marks the pod DisruptionTarget, as a node drain or preemption does.
    kube.request("POST", f"/api/v1/namespaces/{ns}/pods/{pod}/eviction",
                 {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": ns}})
    restarted = wait_for("JobSet restarted", lambda: jobset_status(kube, run).get("restarts", 0) >= 1, TIMEOUT,
                         explain=lambda: str(jobset_status(kube, run)))
    assert restarted
    status = jobset_status(kube, run)
    assert status.get("restartsCountTowardsMax", 0) == 0, status
    assert not jobset_condition(kube, run, "Failed"), status
    assert pod not in _pod_names(kube, run)  # a new pod, bound again


def test_a_deleted_pod_restarts_its_jobset_within_the_restart_budget(queued, submitted):
    _, kube, runs = queued
    run = submitted(variant(runs[SINGLE_HOST_RUN], "deleted"))
    pod = _pod_names(kube, run)[0]
    kube.delete("v1", "Pod", pod, run["metadata"]["namespace"])
    wait_for("JobSet restarted", lambda: jobset_status(kube, run).get("restarts", 0) >= 1, TIMEOUT,
             explain=lambda: str(jobset_status(kube, run)))
    status = jobset_status(kube, run)
    assert status.get("restartsCountTowardsMax", 0) == 1, status
    assert not jobset_condition(kube, run, "Failed"), status
    assert pod not in _pod_names(kube, run)


def test_a_pod_stopped_by_sigterm_must_exit_non_zero_or_its_run_counts_as_done(queued, submitted):
    """Why the trainers exit 143 after their SIGTERM save (trainers/exit_codes.py): a deleted pod
    whose containers all exit 0 is Succeeded (the kubelet's getPhase), its Job completes, and the
    JobSet is Completed with the training unfinished. The same deletion with 143 restarts it
    (test above)."""
    _, kube, runs = queued
    run = submitted(variant(runs[SINGLE_HOST_RUN], "sigterm-exit-0", lambda j: pod_template(j)["metadata"]
                            .setdefault("annotations", {}).update({EXIT_ON_SIGTERM_ANNOTATION: "0"})))
    pod = _pod_names(kube, run)[0]
    kube.delete("v1", "Pod", pod, run["metadata"]["namespace"])
    done = wait_for("JobSet Completed", lambda: jobset_condition(kube, run, "Completed"), TIMEOUT,
                    explain=lambda: str(jobset_status(kube, run)))
    assert done and jobset_status(kube, run).get("restarts", 0) == 0
