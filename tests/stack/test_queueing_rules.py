"""Ladders, priorities and queued pools: every bad input rejected with the key, before anything is declared."""

from __future__ import annotations

import copy

import pytest

from stack import reader
from stack.problems import ConfigError
from stack.queueing import flavor_order, kueue_pools, queued_runs
from tests.support.pulumi_harness import declared_before_error
from tools.render import ROOT

A4 = {"name": "a4", "accelerator": "nvidia-b200", "capacity": "reservation", "reservation": "my-a4"}
ONE_VM_2X4 = {"name": "v6e-2x4-1vm", "accelerator": "tpu-v6e", "topology": "2x4", "machineType": "ct6e-standard-8t"}
TWO_SLICES = {"name": "v6e-2x4-x2", "accelerator": "tpu-v6e", "topology": "2x4",
              "machineType": "ct6e-standard-4t", "slices": 2}  # fmt: skip


def values(**changes) -> dict:
    """The tpu-queued stack's mapping, with `changes` (pools, runs) applied."""
    mapping = copy.deepcopy(reader.model_values(reader.file_values("tpu-queued", ROOT), "tpu-queued"))
    mapping.update(changes)
    return mapping


def pools(*extra) -> list[dict]:
    return values()["pools"] + list(extra)


def ladder_run(**changes) -> dict:
    return {**values()["runs"][0], **changes}


def problems(**changes) -> list[str]:
    with pytest.raises(ConfigError) as err:
        reader.validate(values(**changes))
    return err.value.problems


def test_the_shipped_queued_stack_is_valid():
    config = reader.validate(values())
    assert [r.name for r in queued_runs(config.runs, config.contracts())] == ["gemma3-ladder", "own-container"]
    assert [c.pool for c in config.kueue_flavors()] == ["spot-v6e-2x4", "v6e-2x4", "queued-v6e-2x4"]


@pytest.mark.parametrize("extra,what", [
    (A4, "accelerator 'nvidia-b200', but pool 'spot-v6e-2x4' has 'tpu-v6e'"),
    (ONE_VM_2X4, "chips per host 8, but pool 'spot-v6e-2x4' has 4"),
    (TWO_SLICES, "slices 2, but pool 'spot-v6e-2x4' has 1"),
])  # fmt: skip
def test_a_ladder_over_another_shape_is_rejected_naming_the_rung(extra, what):
    run = ladder_run(ladder=["v6e-2x4", extra["name"]])
    # us-central1-b offers both TPU v6e and B200 (core/offerings.py): the ladder is the one problem.
    where = {"region": "us-central1", "zones": ["us-central1-b"]} if extra is A4 else {}
    [message] = problems(pools=pools(extra), runs=[run], **where)
    assert message.startswith(f"runs[0].ladder[1]: '{extra['name']}' on run 'gemma3-ladder' has {what}")


def test_a_ladder_rung_that_does_not_exist():
    [message] = problems(runs=[ladder_run(ladder=["v5e"])])
    assert message.startswith("runs[0].ladder[0]: 'v5e' does not exist on run 'gemma3-ladder'")


def test_a_rung_named_twice():
    [message] = problems(runs=[ladder_run(ladder=["v6e-2x4", "spot-v6e-2x4"])])
    assert message.startswith("runs[0].ladder[1]: 'spot-v6e-2x4' on run 'gemma3-ladder' is already a rung")


def test_an_unknown_priority_names_the_classes():
    [message] = problems(runs=[ladder_run(priority="urgent")])
    assert message == "runs[0].priority: 'urgent' on run 'gemma3-ladder' is not a priority class; allowed: low, normal, high"


def test_a_queued_pool_with_min_nodes_above_zero():
    queued = {**values()["pools"][0], "autoscaling": {"minNodes": 2, "maxNodes": 2}}
    found = problems(pools=[queued, *values()["pools"][1:]])
    assert any(p.startswith("pools[0].autoscaling.minNodes: 2 with capacity 'queued'") for p in found), found


@pytest.mark.parametrize("pool,seconds,why", [
    (1, 3600, "pools[1].maxRunDurationSeconds: 3600 with capacity 'spot'"),
    (0, 8 * 24 * 3600, "pools[0].maxRunDurationSeconds: 691200 input should be less than or equal to 604800"),
])
def test_max_run_duration_only_on_queued_pools_and_at_most_seven_days(pool, seconds, why):
    changed = values()["pools"]
    changed[pool] = {**changed[pool], "maxRunDurationSeconds": seconds}
    found = problems(pools=changed)
    assert any(p.startswith(why) for p in found), found


def test_ladders_that_disagree_on_the_order_are_rejected():
    other = {**ladder_run(), "name": "other", "pool": "v6e-2x4", "ladder": ["spot-v6e-2x4"]}
    found = problems(runs=[ladder_run(), other])
    assert any(p.startswith("runs[1].ladder: ['spot-v6e-2x4'] on run 'other' tries pool 'v6e-2x4' "
                            "before 'spot-v6e-2x4', and run 'gemma3-ladder' the other way") for p in found), found


@pytest.mark.parametrize("pool,ladder,key", [
    ("queued-v6e-2x4", ["spot-v6e-2x4", "v6e-2x4"], "pool"),       # what tpu-queued used to ship
    ("spot-v6e-2x4", ["queued-v6e-2x4", "v6e-2x4"], "ladder[0]"),
])  # fmt: skip
def test_a_queued_rung_before_the_last_is_rejected(pool, ladder, key):
    """Kueue 0.19.2 retries a failed ProvisioningRequest on its rung, then deactivates: no fall-through."""
    [message] = problems(runs=[ladder_run(pool=pool, ladder=ladder)])
    assert message.startswith(f"runs[0].{key}: 'queued-v6e-2x4' on run 'gemma3-ladder' is a queued pool before "
                              "the ladder's last rung")
    assert message.endswith("allowed: a queued pool as the last rung only")


def autopilot_values(*extra_shapes, **run_changes) -> dict:
    """The autopilot stack's mapping, with shapes added and its run changed."""
    mapping = copy.deepcopy(reader.model_values(reader.file_values("autopilot", ROOT), "autopilot"))
    mapping["shapes"] += list(extra_shapes)
    mapping["runs"] = [{**mapping["runs"][0], **run_changes}]
    return mapping


def autopilot_problems(*extra_shapes, **run_changes) -> list[str]:
    with pytest.raises(ConfigError) as err:
        reader.validate(autopilot_values(*extra_shapes, **run_changes))
    return err.value.problems


def test_priority_stays_refused_on_autopilot():
    found = autopilot_problems(priority="high")
    assert any(p.startswith("runs[0].priority: 'high' on run 'gemma3-single-host': Kueue is not installed on "
                            "Autopilot") for p in found), found


def test_an_autopilot_ladder_is_a_compute_class_and_installs_no_kueue():
    config = reader.validate(autopilot_values())
    assert config.kueue_flavors() == []
    classes = config.compute_classes()
    # Cluster-scoped: named after the stack's namespace (the own cluster's default, finetune).
    assert list(classes) == ["finetune-ladder-gemma3-single-host-8edc53"]
    assert [c.pool for c in classes["finetune-ladder-gemma3-single-host-8edc53"]] == ["v6e-1x1", "v6e-1x1-on-demand"]
    assert all(c.queue is None for c in config.contracts().values())


def test_a_stack_without_an_autopilot_ladder_has_no_compute_class():
    assert reader.validate(autopilot_values(ladder=[])).compute_classes() == {}
    assert reader.validate(values()).compute_classes() == {}  # Standard: Kueue's flavors instead


def test_an_autopilot_ladder_over_another_accelerator_is_rejected_naming_the_rung():
    found = autopilot_problems(ladder=["a4"])
    assert any(p.startswith("runs[0].ladder[0]: 'a4' on run 'gemma3-single-host' has accelerator 'nvidia-b200', "
                            "but pool 'v6e-1x1' has 'tpu-v6e'") for p in found), found


def test_an_autopilot_ladder_over_another_topology_is_rejected():
    v6e_2x2 = {"name": "v6e-2x2", "accelerator": "tpu-v6e", "topology": "2x2"}
    found = autopilot_problems(v6e_2x2, ladder=["v6e-2x2"])
    assert any(p.startswith("runs[0].ladder[0]: 'v6e-2x2' on run 'gemma3-single-host' has chips per host 4")
               for p in found), found


def test_a_rung_capacity_no_compute_class_expresses_is_refused():
    queued = {"name": "v6e-1x1-queued", "accelerator": "tpu-v6e", "topology": "1x1", "capacity": "queued"}
    found = autopilot_problems(queued, ladder=["v6e-1x1-queued"])
    assert any(p.startswith("runs[0].ladder[0]: 'v6e-1x1-queued' on run 'gemma3-single-host' has capacity "
                            "'queued', which no ComputeClass priority") for p in found), found


def test_autopilot_ladders_need_not_agree_on_an_order():
    mapping = autopilot_values()
    other = {**mapping["runs"][0], "name": "other", "pool": "v6e-1x1-on-demand", "ladder": ["v6e-1x1"]}
    config = reader.validate({**mapping, "runs": [*mapping["runs"], other]})
    classes = config.compute_classes()
    assert [c.pool for c in classes["finetune-ladder-other-fe8cbe"]] == ["v6e-1x1-on-demand", "v6e-1x1"]
    assert [c.pool for c in classes["finetune-ladder-gemma3-single-host-8edc53"]] == ["v6e-1x1", "v6e-1x1-on-demand"]


def test_a_run_sharing_a_pool_with_a_ladder_goes_through_kueue_too():
    plain = {**ladder_run(), "name": "plain", "ladder": [], "priority": None, "pool": "v6e-2x4"}
    config = reader.validate(values(runs=[ladder_run(), plain, values()["runs"][1]]))
    assert [r.name for r in queued_runs(config.runs, config.contracts())] == ["gemma3-ladder", "plain"]
    assert "v6e-1x1" not in kueue_pools(config.runs, config.contracts())


def test_the_flavor_order_follows_the_ladders_not_the_file():
    # The file lists queued, spot, on-demand; the ladder's order wins.
    config = reader.validate(values(runs=[ladder_run(pool="v6e-2x4", ladder=["spot-v6e-2x4", "queued-v6e-2x4"])]))
    assert flavor_order(config.runs, config.contracts()) == ["v6e-2x4", "spot-v6e-2x4", "queued-v6e-2x4"]


def test_a_bad_ladder_declares_nothing():
    bad = ladder_run(ladder=["v6e-2x4", "a4"])
    deployment, error = declared_before_error(
        "tpu-queued", overrides={"gke-finetune:pools": pools(A4), "gke-finetune:runs": [bad]}
    )
    assert isinstance(error, ConfigError)
    assert any(p.startswith("runs[0].ladder[1]: 'a4'") for p in error.problems)
    assert deployment.resources == []
