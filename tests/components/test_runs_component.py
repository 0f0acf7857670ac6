"""The Runs component under Pulumi's mocks: what it declares is what manifests/ builds."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
import pytest
from pulumi.runtime.mocks import MockMonitor

from components.runs import IMMUTABLE_PATHS, Runs, RunsArgs
from manifests.run import build_run
from stack.problems import ConfigError
from tests.support import examples


class _Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args):
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args):
        return {}


class _Recorder(MockMonitor):
    def __init__(self, sink):
        super().__init__(_Mocks())
        self.sink = sink

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        self.sink.append((request, pulumi.runtime.rpc.deserialize_properties(request.object), response.urn))
        return response


def declare(runs, images=None):
    """Declare a Runs component for `runs`; return [(request, inputs, urn)] of every registration."""
    sink = []
    pulumi.runtime.set_mocks(_Mocks(), project="gke-finetune", stack="test", preview=False, monitor=_Recorder(sink))

    @pulumi.runtime.test
    def program():
        provider = k8s.Provider("k8s", kubeconfig="{}")
        release = k8s.core.v1.Namespace("jobset-system", opts=pulumi.ResourceOptions(provider=provider))
        args = RunsArgs(
            runs=runs,
            contracts=examples.CONTRACTS,
            bucket=examples.FACTS.bucket,
            images=dict(examples.FACTS.images if images is None else images),
            provider=provider,
            namespace=examples.FACTS.namespace,
            service_account=examples.FACTS.service_account,
            depends_on=[release],
            layout=examples.FACTS.layout,
        )
        component = Runs("runs", args)
        return pulumi.Output.all(*[j.urn for j in component.jobsets.values()])

    program()
    return sink


@pytest.fixture(scope="module")
def registrations():
    return declare(examples.RUNS)


def jobsets(registrations):
    return [(req, inputs) for req, inputs, _ in registrations if req.type == "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"]


def test_one_jobset_per_run_parented_to_the_component(registrations):
    [component] = [(req, urn) for req, _, urn in registrations if req.type == "gke-finetune:workloads:Runs"]
    declared = jobsets(registrations)
    assert sorted(inputs["metadata"]["name"] for _, inputs in declared) == sorted(r.name for r in examples.RUNS)
    for request, _ in declared:
        assert request.parent == component[1]
        assert "pulumi:providers:kubernetes::k8s::" in request.provider


def test_declared_jobsets_are_the_rendered_manifests(registrations):
    by_name = {inputs["metadata"]["name"]: inputs for _, inputs in jobsets(registrations)}
    for run in examples.RUNS:
        expected = build_run(run, examples.CONTRACTS[run.pool], examples.FACTS)
        declared = by_name[run.name]
        assert declared["apiVersion"] == expected["apiVersion"] and declared["kind"] == expected["kind"]
        assert declared["metadata"] == expected["metadata"]
        assert declared["spec"] == expected["spec"]


def test_replacement_and_ordering_options(registrations):
    for request, _ in jobsets(registrations):
        assert list(request.replaceOnChanges) == list(IMMUTABLE_PATHS)
        assert request.deleteBeforeReplace is True
        assert any("jobset-system" in dep for dep in request.dependencies)


def test_a_run_without_an_image_declares_nothing():
    with pytest.raises(ConfigError, match="no image for trainer trl-gpu"):
        declare([examples.RUNS[3]], images={"gemma-jax": examples.FACTS.images["gemma-jax"]})


def test_runs_that_name_their_own_image_need_no_stack_images():
    own = examples.RUNS[0].model_copy(update={"image": examples.FACTS.images["gemma-jax"]})
    [(_, inputs)] = jobsets(declare([own], images={}))
    assert inputs["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0][
        "image"
    ] == own.image
