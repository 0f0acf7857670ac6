"""`make logs`: the process-0 pod's log by default, one process or every one prefixed, the run followed across
its restarts until it ends, and the Cloud Logging link once its pods are gone."""

from __future__ import annotations

from urllib.parse import unquote

import pytest

from core.links import RunPlace
from tests.support.run_objects import ScriptedCluster, jobset, pod
from tools.runs.logs import Target, follow, show, which_problem

RUN = "gemma3-multi-host"
PLACE = RunPlace("my-project-id", "us-east5", "finetune-dev", "finetune", RUN)


def target(which: str = "0", hosts: int = 2, processes: int = 2) -> Target:
    return Target(RUN, PLACE, hosts, processes, which)


def collect(fn, *args, **kwargs) -> list[str]:
    lines: list[str] = []
    assert fn(*args, lines.append, **kwargs) == 0
    return lines


def test_process_zero_by_default_and_the_newest_attempt():
    old, new = pod(RUN, 0, attempt=0, hosts=2, state="terminated", code=143), pod(RUN, 0, attempt=1, hosts=2)
    cluster = ScriptedCluster([([old, new, pod(RUN, 1, hosts=2)], jobset(RUN))],
                              {old["metadata"]["name"]: ["old"], new["metadata"]["name"]: ["step 1", "step 2"],
                               f"{RUN}-trainer-0-1-a0": ["host 1"]})
    assert collect(show, cluster, target()) == ["step 1", "step 2"]


def test_every_process_prefixed_with_its_index():
    pods = [pod(RUN, i, hosts=2) for i in range(4)]
    cluster = ScriptedCluster([(pods, jobset(RUN))], {p["metadata"]["name"]: [f"hello from {i}"] for i, p in enumerate(pods)})
    assert collect(show, cluster, target("all", processes=4)) == [f"[{i}] hello from {i}" for i in range(4)]
    assert collect(show, cluster, target("3", processes=4)) == ["hello from 3"]


def test_a_pod_that_has_not_started_says_so():
    cluster = ScriptedCluster([([pod(RUN, 0, hosts=2, state="waiting")], jobset(RUN))], {})
    [line] = collect(show, cluster, target())
    assert "has not started its trainer yet (Pending)" in line


def test_pods_gone_print_the_cloud_logging_link_instead_of_failing():
    cluster = ScriptedCluster([([], jobset(RUN, "Completed"))], {})
    [message, link] = collect(show, cluster, target())[0].splitlines()
    assert message.startswith(f"logs: run {RUN} has no pods in the cluster")
    query = unquote(link.strip().split(";query=", 1)[1].split(";", 1)[0])
    assert f'labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"="{RUN}"' in query


@pytest.mark.parametrize("which,problem", [("2", "allowed: 0..1 or all"), ("x", "allowed: 0..1 or all"), ("1", ""),
                                           ("all", "")])
def test_a_process_the_run_does_not_have_is_refused(which, problem):
    assert (problem in which_problem(which, 2)) and (bool(which_problem(which, 2)) == bool(problem))


def test_follow_crosses_a_restart_and_stops_when_the_run_ends():
    first = pod(RUN, 0, attempt=0, hosts=2)
    first_done = pod(RUN, 0, attempt=0, hosts=2, state="terminated", code=143, reason="Error")
    second = pod(RUN, 0, attempt=1, hosts=2, created="2026-12-04T10:05:00Z")
    second_done = pod(RUN, 0, attempt=1, hosts=2, state="terminated", code=0, created="2026-12-04T10:05:00Z")
    steps = [([first], jobset(RUN)), ([first_done], jobset(RUN)), ([first_done, second], jobset(RUN)),
             ([first_done, second_done], jobset(RUN, "Completed"))]
    names = [first["metadata"]["name"], second["metadata"]["name"]]
    cluster = ScriptedCluster(steps, {names[0]: ["step 1", "step 2"], names[1]: ["resumed at 2", "step 3"]},
                              advance_after=3)
    lines = collect(follow, cluster, target(), poll=0.01)
    assert lines[:2] == ["step 1", "step 2"]
    assert lines[2] == f"--- pod {names[0]} ended: exit code 143, Error"
    assert "--- waiting for the next pod of this process (the run restarts)" in lines
    assert f"--- pod {names[1]} (attempt 1)" in lines
    assert lines[-4:] == ["resumed at 2", "step 3", f"--- pod {names[1]} ended: exit code 0, Completed",
                          f"--- run {RUN} succeeded"]


def test_follow_leaves_a_stream_that_outlives_its_pod():
    """kwok (like a kubelet that lost its node) keeps a stream open after the pod went: the pod's state decides."""
    running = pod(RUN, 0, hosts=1)
    steps = [([running], jobset(RUN)), ([], jobset(RUN, "Failed"))]
    name = running["metadata"]["name"]
    cluster = ScriptedCluster(steps, {name: ["only line"]}, advance_after=3, hanging=frozenset({name}))
    lines = collect(follow, cluster, target(hosts=1, processes=1), poll=0.01)
    assert lines == ["only line", f"--- pod {name} is gone", f"--- run {RUN} failed"]


def test_follow_on_a_deleted_run_prints_where_its_logs_are():
    cluster = ScriptedCluster([([], None)], {})
    assert "its logs are in Cloud Logging" in collect(follow, cluster, target())[0]


def test_a_broken_stream_is_attached_again_while_its_pod_runs():
    running = pod(RUN, 0, hosts=1)
    done = pod(RUN, 0, hosts=1, state="terminated", code=0)
    name = running["metadata"]["name"]
    cluster = ScriptedCluster([([running], jobset(RUN)), ([done], jobset(RUN, "Completed"))],
                              {name: ["a", "b"]}, advance_after=4, breaks={name: 1})
    lines = collect(follow, cluster, target(hosts=1, processes=1), poll=0.01)
    assert lines[:3] == ["a", f"--- log stream of {name} broke; attaching again", "b"]
    assert cluster.since[0] is None and cluster.since[1] >= 1  # attached again from about the last line
    assert lines[-1] == f"--- run {RUN} succeeded"
