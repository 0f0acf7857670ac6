"""A run's `data` path and `args`, and the stack's counts: each class of bad input names its key.

`args` are checked with the trainer's own flag declarations (its `flags_module`)
before anything is declared; the flags the platform passes itself are not the
run's and are refused separately (test_run_rules.py).
"""

from __future__ import annotations

import importlib

import pytest

from core.trainers import TRAINERS
from stack.config import ConfigError, StackConfig
from stack.runs import RunConfig, run_problems
from tests.support import examples
from tests.support.pulumi_harness import declared_before_error

CONTRACTS = examples.CONTRACTS
TPU = RunConfig(name="tiny", trainer="gemma-jax", pool="v6e-2x4", data="stories.txt")
GPU = RunConfig(name="sql", trainer="trl-gpu", pool="a4")


def problems(run: RunConfig) -> list[str]:
    return [str(p) for p in run_problems([run], CONTRACTS)]


# --- data ---------------------------------------------------------------------------------


@pytest.mark.parametrize("data, why", [
    ("", "is blank"),
    ("   ", "is blank"),
    ("/data/stories.txt", "is absolute"),
    ("gs://bucket/datasets/stories.txt", "is absolute"),
    ("../checkpoints/other/step-1", "climbs out of datasets/<stack>/ with '..'"),
    ("sql/../../profiles/x", "climbs out of datasets/<stack>/ with '..'"),
    ("..", "climbs out of datasets/<stack>/ with '..'"),
])  # fmt: skip
def test_bad_data_paths_are_rejected_naming_the_key(data, why):
    [message] = problems(TPU.model_copy(update={"data": data}))
    assert message.startswith(f"runs[0].data: {data!r} on run 'tiny' {why}"), message
    assert "allowed: a path below the bucket's datasets/<stack>/" in message


@pytest.mark.parametrize("data", ["stories.txt", "sql/train.jsonl", "a/../b.txt", "./stories.txt"])
def test_paths_below_datasets_are_accepted(data):
    assert problems(TPU.model_copy(update={"data": data})) == []
    assert problems(GPU.model_copy(update={"data": data})) == []


# --- args ---------------------------------------------------------------------------------


def test_every_trainer_row_names_a_flags_module_with_argument_problems():
    for name, row in TRAINERS.items():
        assert row.flags_module.startswith(row.image.package + "."), name
        assert callable(importlib.import_module(row.flags_module).argument_problems), name


@pytest.mark.parametrize("run, args, expected", [
    # a misspelt flag, with the trainer's suggestion
    (TPU, ("--max_len", "256"), "runs[0].args: '--max_len' on run 'tiny': unknown flag; did you mean --maxlen?"),
    # a value of the wrong type
    (TPU, ("--maxlen", "abc"), "runs[0].args: '--maxlen' on run 'tiny': 'abc' is not an int"),
    # a stray value
    (TPU, ("stray",), "runs[0].args: 'stray' on run 'tiny': a value without a flag"),
    # a value out of the declared range, and a flag missing its value
    (TPU, ("--batch_size", "0"), "runs[0].args: '--batch_size' on run 'tiny': 0 is below the minimum 1"),
    (TPU, ("--epochs",), "runs[0].args: '--epochs' on run 'tiny': missing value"),
    (GPU, ("--num_train_epochs", "abc"), "runs[0].args: '--num_train_epochs' on run 'sql': 'abc' is not a float"),
    (GPU, ("--max_len", "512"), "runs[0].args: '--max_len' on run 'sql': unknown flag"),
    (GPU, ("stray",), "runs[0].args: 'stray' on run 'sql': a value without a flag"),
])  # fmt: skip
def test_bad_args_are_rejected_naming_the_run_and_the_flag(run, args, expected):
    found = problems(run.model_copy(update={"args": args}))
    assert any(p.startswith(expected) for p in found), found
    assert all("allowed: the flags trainers." in p for p in found), found


def test_each_bad_flag_of_a_run_is_reported():
    found = problems(TPU.model_copy(update={"args": ("--max_len", "1", "--maxlen", "abc", "oops")}))
    assert [p.split(" on run")[0] for p in found] == [
        "runs[0].args: '--max_len'", "runs[0].args: '--maxlen'", "runs[0].args: 'oops'"]


def test_good_args_and_the_shipped_runs_pass():
    assert problems(TPU.model_copy(update={"args": ("--maxlen", "256", "--batch_size=64", "--fsdp")})) == []
    assert problems(GPU.model_copy(update={"args": ("--model_id", "google/gemma-4-31B-it",
                                                    "--num_train_epochs", "3")})) == []


def test_a_platform_flag_is_reported_once_as_the_platforms():
    found = problems(TPU.model_copy(update={"args": ("--data_path", "/x")}))
    assert found == [p for p in found if "is set by the platform" in p] and len(found) == 1


def test_bad_args_in_a_stack_file_fail_before_anything_is_declared():
    run = {"name": "gemma3-single-host", "trainer": "gemma-jax", "pool": "v6e-1x1",
           "data": "TinyStories-train.txt", "args": ["--max_len", "256"]}
    declared, err = declared_before_error("dev", overrides={"gke-finetune:runs": [run]})
    assert isinstance(err, ConfigError)
    assert any(p.startswith("runs[0].args: '--max_len' on run 'gemma3-single-host': unknown flag")
               for p in err.problems), err.problems
    assert declared.resources == []


# --- counts are whole numbers, never booleans ----------------------------------------------

BASE = {"project": "my-project-id", "region": "us-east5", "zones": ["us-east5-b"]}
MULTI = {"name": "p", "accelerator": "tpu-v6e", "topology": "2x4", "machineType": "ct6e-standard-4t"}
SINGLE = {"name": "p", "accelerator": "tpu-v6e", "topology": "1x1"}


@pytest.mark.parametrize("changes, key", [
    ({"pools": [{**MULTI, "slices": True}]}, "pools[0].slices: true"),
    ({"pools": [{**SINGLE, "autoscaling": {"minNodes": True}}]}, "pools[0].autoscaling.minNodes: true"),
    ({"pools": [{**SINGLE, "autoscaling": {"maxNodes": True}}]}, "pools[0].autoscaling.maxNodes: true"),
    ({"pools": [{**SINGLE, "autoscaling": {"maxNodes": 1.0}}]}, "pools[0].autoscaling.maxNodes: 1.0"),
    ({"pools": [{**SINGLE, "slices": "2"}]}, "pools[0].slices: '2'"),
    ({"mode": "autopilot", "shapes": [{**MULTI, "slices": True}]}, "shapes[0].slices: true"),
    ({"systemNodeCount": True}, "systemNodeCount: true"),
    ({"systemNodeCount": "true"}, "systemNodeCount: 'true'"),
    ({"pools": [SINGLE], "runs": [{"name": "r", "trainer": "gemma-jax", "pool": "p", "data": "d",
                                   "chipsPerHost": True}]}, "runs[0].chipsPerHost: true"),
    ({"pools": [SINGLE], "runs": [{"name": "r", "trainer": "gemma-jax", "pool": "p", "data": "d",
                                   "maxRestarts": False}]}, "runs[0].maxRestarts: false"),
])  # fmt: skip
def test_a_boolean_or_float_is_no_count(changes, key):
    with pytest.raises(ConfigError) as err:
        StackConfig.from_mapping({**BASE, **changes})
    assert any(p.startswith(key) for p in err.value.problems), err.value.problems


def test_counts_as_the_cli_passes_them_still_load():
    # The CLI hands top-level keys over as text; structured ones keep their JSON numbers.
    cfg = StackConfig.from_mapping({**BASE, "systemNodeCount": "2", "pools": [{**MULTI, "slices": 2}]})
    assert cfg.system_node_count == 2 and cfg.pools[0].slices == 2
