"""`suspend: true` on a run (what `make cancel` writes): declared suspended in place outside Kueue, left
undeclared on a Kueue run (Kueue would unsuspend an admitted one), and the next program run says the same."""

from __future__ import annotations

import copy

from stack import reader
from tests.support.pulumi_harness import ROOT, run_stack

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
RUNS_KEY = "gke-finetune:runs"


def _suspended(stack: str, *names: str) -> dict:
    runs = copy.deepcopy(reader.file_values(stack, ROOT)[RUNS_KEY])
    for run in runs:
        if run["name"] in names:
            run["suspend"] = True
    return {RUNS_KEY: runs}


def _jobsets(deployment) -> dict:
    return {r.inputs["metadata"]["name"]: r for r in deployment.of_type(JOBSET)}


def test_a_run_outside_kueue_is_declared_suspended_in_place():
    jobsets = _jobsets(run_stack("dev", overrides=_suspended("dev", "gemma3-single-host")))
    declared = jobsets["gemma3-single-host"]
    assert declared.inputs["spec"]["suspend"] is True
    assert declared.ignore_changes == ()  # Pulumi holds it suspended: the next `up` keeps it so


def test_a_suspended_kueue_run_is_not_declared_and_the_others_are():
    deployment = run_stack("tpu-queued", overrides=_suspended("tpu-queued", "gemma3-ladder"))
    jobsets = _jobsets(deployment)
    assert set(jobsets) == {"gemma3-single-host", "own-container"}
    assert jobsets["gemma3-single-host"].inputs["spec"]["suspend"] is False
    assert deployment.outputs["runs"] == ["gemma3-single-host", "own-container"]
    # Kueue and its objects stay: resuming the run queues it again.
    assert any(r.type == "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue" for r in deployment.resources)


def test_resuming_declares_the_kueue_run_as_before():
    before = _jobsets(run_stack("tpu-queued"))["gemma3-ladder"]
    resumed = _jobsets(run_stack("tpu-queued", overrides=_suspended("tpu-queued")))["gemma3-ladder"]
    assert resumed.inputs == before.inputs
