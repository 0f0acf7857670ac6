"""Under preview-mode mocks (no computed outputs, as `pulumi preview` of a new stack): each JobSet's
spec is known but for its trainer's image, so the preview shows the real fields and replacements."""

from __future__ import annotations

import functools

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from components.runs import Runs, RunsArgs, run_spec
from tests.support import examples
from tests.support.pulumi_harness import ROOT, SHIPPED_STACKS, run_stack

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"


@functools.cache
def previewed(stack):
    return run_stack(stack, preview=True)


def unknown_paths(value, path=""):
    """Every path of `value` holding an unknown."""
    if isinstance(value, pulumi.output.Unknown):
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in unknown_paths(v, f"{path}.{k}" if path else k)]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in unknown_paths(v, f"{path}[{i}]")]
    return []


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_every_jobset_spec_is_known_except_the_built_image(stack):
    jobsets = previewed(stack).of_type(JOBSET)
    assert jobsets
    for jobset in jobsets:
        spec = jobset.inputs["spec"]
        pod = spec["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        built = [] if _own_container(stack, jobset.inputs["metadata"]["name"]) else [
            "replicatedJobs[0].template.spec.template.spec.containers[0].image"]  # its own image, by digest
        assert unknown_paths(spec) == built
        assert pod["containers"][0]["args"] and pod["nodeSelector"]  # the real fields, known
        assert spec["failurePolicy"]["rules"] and spec["replicatedJobs"][0]["replicas"] >= 1
        assert unknown_paths(jobset.inputs["metadata"]) == []


def _own_container(stack: str, run: str) -> bool:
    runs = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]["gke-finetune:runs"]
    return not next(r for r in runs if r["name"] == run).get("trainer")


def test_the_preview_mocks_leave_computed_outputs_unknown():
    # What makes the test above able to fail: the image digest and cluster endpoint are not known.
    (provider,) = previewed("dev").of_type("pulumi:providers:kubernetes")
    assert isinstance(provider.inputs["kubeconfig"], pulumi.output.Unknown)
    assert not isinstance(run_stack("dev").of_type("pulumi:providers:kubernetes")[0].inputs["kubeconfig"],
                          pulumi.output.Unknown)


def test_a_pinned_image_leaves_nothing_unknown():
    ref = "us-east5-docker.pkg.dev/my-project-id/finetune/gemma-jax@sha256:" + "b" * 64
    (jobset,) = run_stack("dev", overrides={"gke-finetune:images": {"gemma-jax": ref}}, preview=True).of_type(JOBSET)
    assert unknown_paths(jobset.inputs["spec"]) == []


def test_a_run_depends_on_its_own_trainers_image_only():
    """run_spec puts only the run's trainer's image Output in its spec."""
    seen = {}
    pulumi.runtime.set_mocks(_Mocks(), project="p", stack="s", preview=False)

    @pulumi.runtime.test
    def program():
        images = {t: pulumi.Output.from_input(ref) for t, ref in examples.FACTS.images.items()}
        args = RunsArgs(runs=examples.RUNS, contracts=examples.CONTRACTS, bucket=examples.FACTS.bucket,
                        images=images, provider=k8s.Provider("k8s", kubeconfig="{}"),
                        namespace=examples.FACTS.namespace, service_account=examples.FACTS.service_account,
                        layout=examples.FACTS.layout)
        for run in examples.RUNS:
            outputs = _outputs_in(run_spec(run, examples.CONTRACTS[run.pool], args))
            seen[run.name] = outputs
            assert outputs == ([images[run.trainer]] if run.trainer else []), run.name  # own container: by digest
        return Runs("runs", args).urn

    program()
    assert len(seen) == len(examples.RUNS)


class _Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args):
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args):
        return {}


def _outputs_in(value):
    if isinstance(value, pulumi.Output):
        return [value]
    if isinstance(value, dict):
        return [o for v in value.values() for o in _outputs_in(v)]
    if isinstance(value, list):
        return [o for v in value for o in _outputs_in(v)]
    return []




