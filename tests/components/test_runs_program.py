"""The runs as the whole program declares them, for the shipped stack files."""

from __future__ import annotations

import dataclasses

import pytest

from stack.config import ConfigError
from tests.support.pulumi_harness import SHIPPED_STACKS, declared_before_error, run_stack
from manifests import jobset
from stack.images import UNBUILT_DIGEST
from tests.support import goldens
from tools import render
from manifests.run import build_run
from stack.runs import RunConfig

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
DIGEST = "sha256:" + "1" * 64
IMAGES = {
    "gemma-jax": f"us-east5-docker.pkg.dev/my-project-id/finetune/gemma-jax@{DIGEST}",
    "trl-gpu": f"us-east5-docker.pkg.dev/my-project-id/finetune/trl-gpu@{DIGEST}",
}
MULTISLICE_RUN = {"name": "gemma3-ms", "trainer": "gemma-jax", "pool": "v6e-2x4", "data": "tinystories",
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
    expected = build_run(run, contracts["v6e-2x4"],
                         dataclasses.replace(facts, images=IMAGES, data_paths={run.name: "tinystories/tokens"}))
    assert declared.inputs["spec"] == expected["spec"]
    assert declared.inputs["metadata"] == expected["metadata"]
    assert declared.inputs["metadata"]["annotations"]["alpha.jobset.sigs.k8s.io/exclusive-topology"]


def test_runs_wait_for_the_controller_and_the_workspace(multislice):
    [declared] = multislice.of_type(JOBSET)
    release = multislice.of_type("kubernetes:helm.sh/v3:Release")[0]
    assert release.urn in declared.dependencies
    assert any(dep.endswith("::runs-workspace-ksa") for dep in declared.dependencies)
    assert not any("hf-token" in dep for dep in declared.dependencies)  # a TPU run reads no Hub
    assert multislice.outputs["runs"] == ["gemma3-ms"]


def test_hub_runs_also_wait_for_the_token_secret():
    [declared] = run_stack("a4").of_type(JOBSET)
    assert any(dep.endswith("::runs-workspace-hf-token") for dep in declared.dependencies)


def test_a_bad_run_in_a_stack_file_fails_before_anything_is_declared():
    bad = {**MULTISLICE_RUN, "trainer": "trl-gpu"}
    deployment, error = declared_before_error(
        "tpu-multislice", overrides={"gke-finetune:runs": [bad], "gke-finetune:images": IMAGES}
    )
    assert isinstance(error, ConfigError)
    assert any("trainer trl-gpu needs a GPU pool" in p for p in error.problems)
    assert deployment.resources == []


def _without_digests(value):
    """`value` with every image digest blanked (numbers compare equal as wire floats or ints)."""
    import json
    import re

    return json.loads(re.sub(r"@sha256:[0-9a-f]{64}", "@sha256:<digest>", json.dumps(value)))


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_the_program_applies_the_golden_manifests_with_the_built_image_digests(stack):
    """What is reviewed (tests/golden/<stack>/) is what `pulumi up` applies, but the digests
    of the images it builds, which exist only after the build."""
    expected = goldens.manifests_for(stack)
    declared = run_stack(stack).of_type(JOBSET)
    assert expected and len(declared) == len(expected)
    for jobset in declared:
        golden = expected[jobset.inputs["metadata"]["name"]]
        assert _without_digests(jobset.inputs["spec"]) == _without_digests(golden["spec"])
        assert jobset.inputs["metadata"] == golden["metadata"]
        if UNBUILT_DIGEST in _images(golden):  # a trainer's image, built by `pulumi up`
            assert UNBUILT_DIGEST not in _images(jobset.inputs)
        else:  # one's own container: its image by digest, in the golden as applied
            assert _images(golden) == _images(jobset.inputs)


def _images(manifest: dict) -> str:
    return " ".join(c["image"] for c in jobset.containers(manifest))


# The GKE tutorials' runs: the TPU tutorial's single-host, multi-host and
# multislice runs, and the A4 tutorial's Gemma 4 LoRA run, with their flags.
SEED_RUNS = {
    "dev": ("gemma3-single-host", "v6e-1x1", ["--maxlen", "256", "--batch_size", "64", "--datacount", "355120"]),
    "tpu-multihost": ("gemma3-multi-host", "v6e-2x4", ["--maxlen", "256", "--batch_size", "64", "--datacount", "5120"]),
    "tpu-multislice": ("gemma3-multislice", "v6e-2x4", ["--maxlen", "256", "--batch_size", "64", "--datacount", "5120"]),
    "a4": ("gemma4-sql", "a4", ["--model_id", "google/gemma-4-31B-it", "--num_train_epochs", "3",
                                "--per_device_train_batch_size", "8", "--gradient_accumulation_steps", "8",
                                "--learning_rate", "1e-5", "--save_steps", "0.05", "--eval_steps", "0.25"]),
    "autopilot": ("gemma3-single-host", "v6e-1x1",
                  ["--maxlen", "256", "--batch_size", "64", "--datacount", "355120"]),
    # The multi-host run again, on a ladder from Spot to a queued slice.
    "tpu-queued": ("gemma3-ladder", "spot-v6e-2x4",
                   ["--maxlen", "256", "--batch_size", "64", "--datacount", "5120"]),
}  # fmt: skip


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_each_shipped_stack_declares_its_seed_run_on_built_images(stack):
    name, pool, args = SEED_RUNS[stack]
    runs, contracts, _facts = render.stack_inputs(stack)
    [run] = [r for r in runs if r.name == name]
    assert run.pool == pool and list(run.args) == args
    assert run.image is None  # built from this repository by `pulumi up`
    if stack == "tpu-multislice":
        assert contracts[pool].slices == 2 and contracts[pool].hosts_per_slice == 2
    if stack == "tpu-multihost":
        assert contracts[pool].slices == 1 and contracts[pool].hosts_per_slice == 2
