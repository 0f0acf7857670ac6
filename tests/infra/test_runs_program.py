"""The runs as the whole program declares them, for the shipped stack files."""

from __future__ import annotations

import pytest

from infra.config import ConfigError
from tests.infra.pulumi_harness import SHIPPED_STACKS, declared_before_error, run_stack
from workloads import render
from workloads.manifests import PlatformFacts, build_run
from workloads.spec import RunConfig

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
DIGEST = "sha256:" + "1" * 64
IMAGES = {
    "gemma-jax": f"us-east5-docker.pkg.dev/my-project-id/finetune/gemma-jax@{DIGEST}",
    "trl-gpu": f"us-east5-docker.pkg.dev/my-project-id/finetune/trl-gpu@{DIGEST}",
}
MULTISLICE_RUN = {"name": "gemma3-ms", "trainer": "gemma-jax", "pool": "v6e-2x4", "data": "TinyStories-train.txt",
                  "args": ["--maxlen", "256", "--batch_size", "64"]}  # fmt: skip
OVERRIDES = {"gke-finetune:runs": [MULTISLICE_RUN], "gke-finetune:images": IMAGES}


@pytest.fixture(scope="module")
def multislice():
    return run_stack("tpu-multislice", overrides=OVERRIDES)


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_each_shipped_stack_declares_its_runs(stack):
    runs, _contracts, _facts = render.stack_inputs(stack)
    declared = run_stack(stack).of_type(JOBSET)
    assert sorted(r.inputs["metadata"]["name"] for r in declared) == sorted(r.name for r in runs)


def test_program_applies_the_rendered_manifest(multislice):
    _runs, contracts, facts = render.stack_inputs("tpu-multislice")
    [declared] = multislice.of_type(JOBSET)
    run = RunConfig(**MULTISLICE_RUN)
    expected = build_run(run, contracts["v6e-2x4"], PlatformFacts(facts.bucket, IMAGES))
    assert declared.inputs["spec"] == expected["spec"]
    assert declared.inputs["metadata"] == expected["metadata"]
    assert declared.inputs["metadata"]["annotations"]["alpha.jobset.sigs.k8s.io/exclusive-topology"]


def test_runs_wait_for_the_controller_and_the_workspace(multislice):
    [declared] = multislice.of_type(JOBSET)
    release = multislice.of_type("kubernetes:helm.sh/v3:Release")[0]
    assert release.urn in declared.dependencies
    assert any("hf-token" in dep for dep in declared.dependencies)
    assert multislice.outputs["runs"] == ["gemma3-ms"]


def test_a_bad_run_in_a_stack_file_fails_before_anything_is_declared():
    bad = {**MULTISLICE_RUN, "trainer": "trl-gpu"}
    deployment, error = declared_before_error(
        "tpu-multislice", overrides={"gke-finetune:runs": [bad], "gke-finetune:images": IMAGES}
    )
    assert isinstance(error, ConfigError)
    assert any("trainer trl-gpu needs a GPU pool" in p for p in error.problems)
    assert deployment.resources == []
