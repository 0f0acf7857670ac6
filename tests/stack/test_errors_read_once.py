"""Errors a person reads once: an unknown key names the closest allowed key; the root cause comes first; a
mistyped region says so without "None"; a pool where its accelerator isn't offered is refused from the sourced
table (core/offerings.py); the placeholder project is refused for `pulumi up` only."""

from __future__ import annotations

import copy

import pytest

from core.offerings import ZONES, offered_regions
from core.syntax import ZONE
from stack import reader
from stack.problems import ConfigError
from tests.support.pulumi_harness import ROOT, run_stack


def values(stack: str = "dev") -> dict:
    return copy.deepcopy(reader.model_values(reader.file_values(stack, ROOT), stack))


def problems(mapping: dict) -> list[str]:
    with pytest.raises(ConfigError) as err:
        reader.validate(mapping)
    return err.value.problems


@pytest.mark.parametrize("where,typo,expected", [
    ("top", "poools", "poools: [] is an unknown key; did you mean 'pools'?; allowed: the keys Pulumi.yaml declares"),
    ("run", "traner", "runs[0].traner: 'x' is an unknown key; did you mean 'trainer'?; allowed: args, chipsPerHost"),
    ("autoscaling", "maxNode", "pools[0].autoscaling.maxNode: 2 is an unknown key; did you mean 'maxNodes'?; "
                               "allowed: maxNodes, minNodes"),
])  # fmt: skip
def test_an_unknown_key_names_the_closest_allowed_key(where, typo, expected):
    mapping = values()
    if where == "top":
        mapping[typo] = []
    elif where == "run":
        mapping["runs"][0][typo] = "x"
    else:
        mapping["pools"][0]["autoscaling"] = {typo: 2}
    [message] = problems(mapping)
    assert message.startswith(expected), message


def test_an_unknown_key_like_no_allowed_one_suggests_nothing():
    mapping = values()
    mapping["runs"][0]["zzzz"] = 1
    [message] = problems(mapping)
    assert "did you mean" not in message and message.startswith("runs[0].zzzz: 1 is an unknown key; allowed: args")


def test_a_gpu_trainer_on_a_tpu_pool_says_so_first():
    mapping = values()
    mapping["runs"][0]["trainer"] = "trl-gpu"
    found = problems(mapping)
    assert len(found) > 3
    assert found[0].startswith("runs[0].pool: 'v6e-1x1' on run 'gemma3-single-host': trainer trl-gpu needs a GPU pool")


def test_a_pool_that_does_not_exist_comes_first():
    mapping = values()
    mapping["runs"][0].update(pool="v6e-1x2", args=["--nope"])
    assert problems(mapping)[0].startswith("runs[0].pool: 'v6e-1x2' does not exist on run")


def test_a_mistyped_region_is_the_one_thing_named_and_no_none():
    mapping = values()
    mapping.update(region="us-east-5", zones=[])
    found = problems(mapping)
    assert found[0] == "gcp:region: 'us-east-5' is not a region; allowed: e.g. 'us-east5'"
    assert all("None" not in p for p in found), found


def test_a_region_without_the_accelerator_is_refused_once_naming_where_it_is():
    mapping = values("tpu-queued")
    mapping.update(region="europe-west1", zones=["europe-west1-b"])
    [message] = problems(mapping)  # four v6e pools, one root cause
    assert message.startswith("gcp:region: 'europe-west1' offers no tpu-v6e (pool 'queued-v6e-2x4'; "
                              "https://cloud.google.com/tpu/docs/regions-zones")
    assert message.endswith("allowed: a region that does: " + ", ".join(offered_regions("tpu-v6e")))


def test_a_zone_without_the_accelerator_is_refused_with_the_regions_zones_that_have_it():
    mapping = values()
    mapping["zones"] = ["us-east5-c"]
    [message] = problems(mapping)
    assert message.startswith("pools[0].zones[0]: 'us-east5-c' does not offer tpu-v6e (pool 'v6e-1x1'")
    assert message.endswith("allowed: us-east5-a, us-east5-b")
    a4 = values("a4")
    a4["zones"] = ["us-central1-a"]
    assert problems(a4)[0].startswith("pools[0].zones[0]: 'us-central1-a' does not offer nvidia-b200")


def test_an_autopilot_shape_in_a_region_without_it_is_refused():
    mapping = values("autopilot")
    mapping["region"] = "us-east5"  # v6e yes, B200 no
    [message] = problems(mapping)
    assert message.startswith("gcp:region: 'us-east5' offers no nvidia-b200 (pool 'a4'")


def test_the_offerings_table_holds_zones():
    assert all(ZONE.match(zone) for zones in ZONES.values() for zone in zones)


def test_the_placeholder_project_is_refused_for_up_only(monkeypatch):
    run_stack("dev")  # the offline plan and the tests: mocks, as `up`
    run_stack("dev", preview=True)
    monkeypatch.setattr(reader, "applying", lambda: True)  # a real `pulumi up`
    with pytest.raises(ConfigError) as err:
        run_stack("dev")
    [message] = err.value.problems
    assert message.startswith("gcp:project: 'my-project-id' is the shipped stack files' placeholder, refused for "
                              "`pulumi up`")
    run_stack("dev", overrides={"gcp:project": "ml-team-prod"})  # a real project id is taken

