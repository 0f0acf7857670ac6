"""run_problems: every bad run is reported with a message that names the run and the fix."""

from __future__ import annotations

import dataclasses

import pytest

from manifests.run import build_runs
from stack.problems import ConfigError
from stack.runs import RunConfig, run_problems
from tests.support import examples

CONTRACTS = examples.CONTRACTS
GOOD = RunConfig(name="ok", trainer="gemma-jax", pool="v6e-2x4", data="stories.txt")
GPU = RunConfig(name="sql", trainer="trl-gpu", pool="a4")


def problems(*runs: RunConfig) -> list[str]:
    return [str(p) for p in run_problems(runs, CONTRACTS)]


def test_example_runs_are_valid():
    assert run_problems(examples.RUNS, CONTRACTS) == []


def test_unknown_pool_names_the_declared_pools():
    [message] = problems(GOOD.model_copy(update={"pool": "v5e"}))
    assert "run 'ok'" in message and "runs[0].pool: 'v5e' does not exist" in message
    assert "'v6e-2x4'" in message and "'a4'" in message


def test_gpu_trainer_on_tpu_pool():
    [message] = problems(GPU.model_copy(update={"pool": "v6e-1x1"}))
    assert "trainer trl-gpu needs a GPU pool" in message and "'v6e-1x1'" in message


def test_tpu_trainer_on_gpu_pool():
    [message] = problems(GOOD.model_copy(update={"pool": "a4"}))
    assert "trainer gemma-jax needs a TPU pool" in message


def test_chips_per_host_above_the_vm():
    [message] = problems(GOOD.model_copy(update={"chips_per_host": 8}))
    assert "runs[0].chipsPerHost: 8 on run 'ok' is more than the 4 chips of one ct6e-standard-4t VM" in message
    [message] = problems(GPU.model_copy(update={"chips_per_host": 16}))
    assert "more than the 8 chips" in message


def test_fewer_chips_on_a_multi_host_slice_are_rejected_but_allowed_on_one_gpu_machine():
    [message] = problems(GOOD.model_copy(update={"chips_per_host": 2}))
    assert "every host of a slice must use all 4 chips" in message
    assert problems(GPU.model_copy(update={"chips_per_host": 4})) == []


@pytest.mark.parametrize("name", ["Gemma", "1run", "run_1", "run-", "", "a" * 64, "ré"])
def test_name_that_is_not_a_dns_label(name):
    [message] = problems(GOOD.model_copy(update={"name": name}))
    assert f"runs[0].name: {name!r} is not a DNS-1035 label" in message


def test_name_too_long_for_the_derived_pod_hostnames():
    name = "a" * 52  # a valid label, but <name>-trainer-1-1 has 64 characters
    [message] = problems(GOOD.model_copy(update={"name": name, "pool": "v6e-2x4-x2"}))
    assert "runs[0].name: " in message and "is too long for pool 'v6e-2x4-x2'" in message and f"'{name}-trainer-1-1'" in message
    assert problems(GOOD.model_copy(update={"name": "a" * 51})) == []  # <name>-trainer-0-1: 63


def test_duplicate_names():
    messages = problems(GOOD, GOOD.model_copy(update={"pool": "v6e-1x1"}))
    assert messages == ["runs[1].name: 'ok' is declared 2 times; allowed: unique run names"]


def test_flags_the_platform_sets_are_rejected():
    [message] = problems(GOOD.model_copy(update={"args": ("--checkpoint_dir=/tmp/x",)}))
    assert "flag --checkpoint_dir is set by the platform" in message
    [message] = problems(GPU.model_copy(update={"args": ("--output_dir", "/tmp")}))
    assert "flag --output_dir" in message


def test_reserved_and_invalid_env_names():
    messages = problems(GOOD.model_copy(update={"env": {"MEGASCALE_SLICE_ID": "0", "1BAD": "x", "OK": "1"}}))
    assert len(messages) == 2
    assert any("env MEGASCALE_SLICE_ID is set by the platform" in m for m in messages)
    assert any("env name '1BAD' is not a valid variable name" in m for m in messages)


@pytest.mark.parametrize(
    "image",
    [
        "us-docker.pkg.dev/p/r/jax:latest",
        "us-docker.pkg.dev/p/r/jax:1.0",
        "us-docker.pkg.dev/p/r/jax",
        "us-docker.pkg.dev/p/r/jax@sha256:abc",
    ],
)
def test_image_override_must_be_a_digest(image):
    [message] = problems(GOOD.model_copy(update={"image": image}))
    assert "must be pinned by digest" in message


def test_tpu_run_without_data():
    [message] = problems(GOOD.model_copy(update={"data": None}))
    assert "trainer gemma-jax needs `data`" in message


def test_every_problem_is_reported_at_once():
    bad = [
        GOOD.model_copy(update={"name": "Bad_Name"}),
        GPU.model_copy(update={"pool": "v6e-1x1"}),
        GOOD.model_copy(update={"name": "other", "pool": "nope"}),
    ]
    assert len(problems(*bad)) == 3


def test_build_rejects_a_tagged_stack_image():
    facts = dataclasses.replace(examples.FACTS, images={**examples.FACTS.images, "trl-gpu": "r/p/i:latest"})
    with pytest.raises(ValueError, match="must be pinned by digest"):
        build_runs([GPU], CONTRACTS, facts)


def test_build_names_a_run_without_an_image():
    facts = dataclasses.replace(examples.FACTS, images={"gemma-jax": examples.FACTS.images["gemma-jax"]})
    with pytest.raises(ConfigError, match=r"runs\[0\].image: None on run 'sql': no image for trainer trl-gpu"):
        build_runs([GPU], CONTRACTS, facts)


def test_stack_file_keys_are_camel_case():
    run = RunConfig.model_validate(
        {"name": "r", "trainer": "trl-gpu", "pool": "a4", "chipsPerHost": 4, "maxRestarts": 1}
    )
    assert (run.chips_per_host, run.max_restarts) == (4, 1)
    with pytest.raises(ValueError, match="max_restart"):
        RunConfig.model_validate({"name": "r", "trainer": "trl-gpu", "pool": "a4", "max_restart": 1})
