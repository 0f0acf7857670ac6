"""The bucket layout (core/names.py): every prefix carries the stack; a run deployed before keeps its own."""

from __future__ import annotations

import pytest

from core.names import BucketLayout, checkpoint_prefix, export_prefix, run_prefixes
from stack.config import ConfigError, StackConfig

BASE = {"project": "my-project-id", "region": "us-east5", "zones": ["us-east5-b"]}
RUNS = [{"name": name, "trainer": "gemma-jax", "pool": "p", "data": "stories"} for name in ("a", "b")]
POOLS = [{"name": "p", "accelerator": "tpu-v6e", "topology": "1x1"}]
DATASETS = [{"name": "stories", "url": "https://example.com/stories.txt"}]


def config(stack: str = "team-a") -> StackConfig:
    return StackConfig.from_mapping({**BASE, "stack": stack, "pools": POOLS, "runs": RUNS, "datasets": DATASETS})


def test_each_prefix_carries_the_stack():
    layout = config().bucket_layout
    assert layout.run("a") == run_prefixes("team-a", "a")
    assert (layout.run("a").data, *layout.run("a").writes) == (
        "datasets/team-a", "checkpoints/team-a/a", "profiles/team-a/a")
    assert layout.dataset("stories") == "datasets/team-a/stories"
    assert export_prefix("team-a", "a") == "exports/team-a/a"
    # Another stack's run of the same name writes elsewhere.
    assert not set(config("team-b").bucket_layout.run("a").writes) & set(layout.run("a").writes)


def test_a_legacy_run_keeps_the_prefixes_it_was_deployed_with_and_the_others_move():
    legacy = config().with_legacy_runs(["a", "not-a-run"])
    assert legacy.bucket_layout.legacy_runs == {"a"}  # only the stack's own runs
    assert legacy.bucket_layout.run("a").writes == ("checkpoints/a", "profiles/a")
    assert legacy.bucket_layout.run("a").data == "datasets" and legacy.bucket_layout.run("a").legacy
    assert legacy.bucket_layout.run("b").writes == (checkpoint_prefix("team-a", "b"), "profiles/team-a/b")
    assert config().bucket_layout.legacy_runs == frozenset()  # the copy changed nothing of the original


def test_the_folders_come_parents_first_and_leave_out_what_a_legacy_run_wrote():
    folders = BucketLayout("s", frozenset({"a"})).folders(["a", "b"], ["d"], exports=["b"])
    assert folders == ("datasets/", "datasets/s/", "datasets/s/d/", "checkpoints/", "checkpoints/s/",
                       "checkpoints/s/b/", "profiles/", "profiles/s/", "profiles/s/b/", "exports/", "exports/s/",
                       "exports/s/b/")
    for i, folder in enumerate(folders):
        parent = folder.rstrip("/").rpartition("/")[0]
        assert not parent or f"{parent}/" in folders[:i], folder


@pytest.mark.parametrize("stack", [".", "..", ".hidden", "a/b", "a,b", "x" * 101])
def test_a_stack_name_that_is_no_path_segment_is_refused(stack):
    with pytest.raises(ConfigError) as err:
        config(stack)
    assert err.value.problems == [f"stack: {stack!r} is not a stack name the bucket's prefixes can carry; allowed: "
                                  "letters, digits, '_', '-' and '.', not starting with '.'"]


@pytest.mark.parametrize("stack", ["dev", "team_a.v2", "A-1"])
def test_pulumi_stack_names_are_accepted(stack):
    assert config(stack).bucket_layout.datasets == f"datasets/{stack}"
