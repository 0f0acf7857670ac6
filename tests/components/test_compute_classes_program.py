"""What the program declares for an Autopilot stack's capacity ladders: a ComputeClass each, before the run."""

from __future__ import annotations

import pytest

from tests.support.pulumi_harness import SHIPPED_STACKS, run_stack
from tools import render

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
COMPUTE_CLASS = "kubernetes:cloud.google.com/v1:ComputeClass"
CLUSTER = "gcp:container/cluster:Cluster"


def test_the_autopilot_ladder_is_declared_as_its_compute_class_and_the_run_waits_for_it():
    deployment = run_stack("autopilot")
    [declared] = deployment.of_type(COMPUTE_CLASS)
    [expected] = render.stack_compute_class_manifests("autopilot").values()
    assert declared.inputs == expected
    [cluster] = deployment.of_type(CLUSTER)
    assert cluster.urn in declared.dependencies
    [run] = deployment.of_type(JOBSET)
    assert declared.urn in run.dependencies
    selector = run.inputs["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["nodeSelector"]
    assert selector == {"cloud.google.com/compute-class": expected["metadata"]["name"]}


@pytest.mark.parametrize("stack", [s for s in SHIPPED_STACKS if s != "autopilot"])
def test_standard_stacks_declare_no_compute_class(stack):
    assert run_stack(stack).of_type(COMPUTE_CLASS) == []
    assert render.stack_compute_class_manifests(stack) == {}
