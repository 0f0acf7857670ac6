"""`make status ... WAIT=1`: each change of phase printed, and the documented exit codes; a failed run says what
its exit code means (78 and the trainer's own words, SIGTERM, OOM kill) and what to do next."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.run_objects import pod
from tools.runs.explain import config_problem, explain, failure_inputs
from tools.runs.wait import (EX_FAILED, EX_NOINPUT, EX_OK, EX_SUSPENDED, EX_TEMPFAIL, EX_UNAVAILABLE, WITHDRAWN_DETAIL,
                             suspended_in_file, wait)
from tools.status.model import RunStatus
from tools.status.sources import ClusterUnreachable, NotDeployed
from trainers.gemma_jax import flags as jax_flags

from tests.support.pulumi_harness import ROOT


class Scripted:
    """Rows from a script, one step per poll (an exception in the script is raised)."""

    def __init__(self, *steps):
        self.steps, self.i, self.explained = list(steps), 0, []

    def rows(self):
        step = self.steps[min(self.i, len(self.steps) - 1)]
        self.i += 1
        if isinstance(step, Exception):
            raise step
        return [RunStatus(run=r, phase=p, detail=d) for r, p, d in step]

    def explain(self, row):
        self.explained.append(row.run)
        return [f"explained {row.run}"]


class Clock:
    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def run_wait(probe, timeout=None, grace=300.0):
    clock, lines = Clock(), []
    code = wait(probe, lines.append, timeout=timeout, poll=10.0, unreachable_grace=grace, clock=clock, sleep=clock.sleep)
    return code, lines


def test_each_change_of_phase_is_printed_once_and_success_is_zero():
    probe = Scripted([("r", "waiting for quota", "pending")], [("r", "waiting for quota", "pending")],
                     [("r", "admitted", "1/2 pods ready")], [("r", "running", "")], [("r", "succeeded", "")])
    code, lines = run_wait(probe)
    assert code == EX_OK == 0
    assert [line.split(" ", 1)[1] for line in lines] == [
        "r: waiting for quota (pending)", "r: admitted (1/2 pods ready)", "r: running", "r: succeeded"]


def test_a_failed_run_exits_3_with_its_explanation():
    probe = Scripted([("r", "running", "")], [("r", "failed", "FailJobSetFailurePolicyAction: x")])
    code, lines = run_wait(probe)
    assert code == EX_FAILED == 3 and lines[-1] == "explained r" and probe.explained == ["r"]


def test_every_run_must_end_and_one_failure_fails_them_all():
    probe = Scripted([("a", "succeeded", ""), ("b", "running", "")], [("a", "succeeded", ""), ("b", "failed", "")])
    assert run_wait(probe)[0] == EX_FAILED


def test_a_suspended_run_exits_4():
    assert run_wait(Scripted([("r", "suspended", "spec.suspend is true")]))[0] == EX_SUSPENDED == 4


def test_a_kueue_run_the_stack_file_suspends_is_suspended_not_missing():
    rows = suspended_in_file([RunStatus(run="r", phase="not submitted"), RunStatus(run="s", phase="not submitted")],
                             {"r"})
    assert [(r.phase, r.detail) for r in rows] == [("suspended", WITHDRAWN_DETAIL), ("not submitted", "")]


def test_not_admitted_within_the_timeout_exits_75_naming_the_phase():
    probe = Scripted([("r", "waiting for quota", "ClusterQueue finetune is full")])
    code, lines = run_wait(probe, timeout=60)
    assert code == EX_TEMPFAIL == 75
    assert lines[-1].startswith("wait: not admitted within 60 s: r (still r: waiting for quota)")


def test_the_timeout_does_not_end_a_run_that_is_admitted():
    steps = [[("r", "running", "")]] * 30 + [[("r", "succeeded", "")]]
    assert run_wait(Scripted(*steps), timeout=60)[0] == EX_OK


def test_a_cluster_that_never_answers_exits_69_at_once():
    code, lines = run_wait(Scripted(ClusterUnreachable("connection refused")))
    assert code == EX_UNAVAILABLE == 69 and lines == ["wait: the cluster cannot be reached: connection refused"]


def test_a_cluster_that_stops_answering_is_waited_for_then_69():
    steps = [[("r", "running", "")]] + [ClusterUnreachable("timed out")] * 3 + [[("r", "succeeded", "")]]
    assert run_wait(Scripted(*steps), grace=300)[0] == EX_OK
    steps = [[("r", "running", "")]] + [ClusterUnreachable("timed out")] * 40
    code, lines = run_wait(Scripted(*steps), grace=300)
    assert code == EX_UNAVAILABLE and lines[-1].startswith("wait: the cluster cannot be reached since")


def test_nothing_deployed_exits_66():
    assert run_wait(Scripted(NotDeployed("namespace 'finetune' does not exist")))[0] == EX_NOINPUT == 66


# --- what a failed run's end means ---------------------------------------------------------------


def test_78_quotes_the_trainers_own_configuration_error():
    [problem] = jax_flags.argument_problems(["--batch_size=0"])
    tail = f"I1204 loading\nconfiguration error: {problem}\n"
    lines = explain("r", "FailJobSetFailurePolicyAction", "FailJobSetFailurePolicyAction: failed", 78, "Error", tail)
    assert lines[0] == "run r failed: FailJobSetFailurePolicyAction: failed"
    assert "exit code 78: a configuration problem a restart can't fix" in lines[1]
    assert lines[2] == f"  the trainer said configuration error: {problem}"
    assert lines[-1].startswith("  next             fix it in the stack file")
    assert config_problem("x\nconfiguration error: a\nconfiguration error: b\n") == "configuration error: b"


def test_an_oom_kill_says_memory_whatever_the_code():
    lines = explain("r", "FailedJobs", "FailedJobs: x", 137, "OOMKilled", "")
    assert "killed for memory (OOMKilled, exit code 137)" in lines[1]
    assert "smaller --batch_size" in lines[-1]


def test_sigterm_and_restarts_that_ran_out():
    lines = explain("r", "ReachedMaxRestarts", "ReachedMaxRestarts: jobset exceeded max restarts", 143, "Error",
                    "saving checkpoint 40\n")
    assert "its restarts ran out (maxRestarts); the last one ended with exit code 143" in lines[1]
    assert lines[-1].startswith("  next             look at why the pods kept failing")
    assert "stopped by SIGTERM after writing a checkpoint" in explain("r", "", "", 143, "Error", "")[1]


def test_a_run_kueue_deactivated_says_so_and_where_to_look():
    lines = explain("r", "", "Kueue deactivated the run: ProvisioningRequest failed", None, "", "")
    assert "Kueue deactivated its Workload" in lines[1] and "`make inspect` shows the ProvisioningRequests" in lines[2]


def test_without_a_log_the_cloud_logging_link_is_given():
    lines = explain("r", "", "", 1, "Error", "", logs_link="https://console.cloud.google.com/logs/query;query=x")
    assert "  its log          in Cloud Logging: https://console.cloud.google.com/logs/query;query=x" in lines


def test_the_failed_pods_exit_code_and_reason():
    assert failure_inputs(pod("r", 0, state="terminated", code=137, reason="OOMKilled")) == (137, "OOMKilled")
    assert failure_inputs(None) == (None, "")


def test_make_status_wait_keeps_the_tools_code_in_its_message(tmp_path):
    """Through make: the tool's code and the command that exits with it (make itself exits 2)."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text('{"apiVersion": "v1", "kind": "Config", "current-context": "other", "clusters": '
                          '[{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}], "users": [{"name": "u", '
                          '"user": {}}], "contexts": [{"name": "other", "context": {"cluster": "c", "user": "u"}}]}')
    done = subprocess.run(["make", "-s", "-o", ".venv/.installed", "status", "STACK=dev", "WAIT=1"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin",
                                                                           "KUBECONFIG": str(kubeconfig)})
    assert done.returncode == 2, done.stderr
    assert "has no context gke_my-project-id_us-east5_finetune-dev" in done.stderr
    assert "make status: exit code 78" in done.stderr
    assert "for the code, run .venv/bin/python -m tools.runs wait --all --stack dev" in done.stderr


def test_the_cluster_probe_computes_rows_from_the_clusters_jobsets():
    """The rows `make status WAIT=1` waits on, from a snapshot with a JobSet, as `make status` makes them."""
    from stack.reader import load_files
    from tests.support.status_objects import jobset
    from tools.runs.wait import ClusterProbe
    from tools.status.row import run_facts
    from tools.status.sources import empty

    config = load_files("dev", ROOT)

    class Cluster:
        def snapshot(self):
            return {**empty(), "jobsets": [jobset("gemma3-single-host")]}

    [row] = ClusterProbe(Cluster(), run_facts(config), ["gemma3-single-host"], set(), {}).rows()
    assert row.run == "gemma3-single-host" and row.phase != "not submitted"


def test_a_failed_export_s_exit_code_is_explained():
    from tools.runs.explain import meaning
    from trainers.exit_codes import EXPORT_FAILED

    what, next_step = meaning(EXPORT_FAILED, "Error")
    assert what.startswith("exit code 73: training succeeded") and "checkpoints are untouched" in what
    assert "make logs" in next_step
