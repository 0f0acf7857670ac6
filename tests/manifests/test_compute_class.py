"""An Autopilot run's capacity ladder as a ComputeClass, and its pods selecting it."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from core.catalog import COMPUTE_CLASS_LABEL, FLEX_START_LABEL, RESERVATION_NAME_LABEL, SPOT_LABEL
from manifests.compute_class import capacity_rule, compute_class, compute_class_manifests
from manifests.kueue import PRIORITY_LABEL, QUEUE_LABEL
from manifests.run import build_runs, platform_facts
from stack import reader
from stack.images import offline_images
from stack.queueing import run_contract
from tests.support import goldens
from tools.render import ROOT, shipped_stacks, to_yaml

B200 = {"accelerator": "nvidia-b200"}
V6E_2X4 = {"accelerator": "tpu-v6e", "topology": "2x4", "machineType": "ct6e-standard-4t"}


def autopilot(shapes: list[dict], run: dict | None = None):
    """The autopilot stack with `shapes`, and its run changed by `run`."""
    mapping = copy.deepcopy(reader.model_values(reader.file_values("autopilot", ROOT), "autopilot"))
    mapping["shapes"] = shapes
    mapping["runs"] = [{**mapping["runs"][0], **(run or {})}]
    return reader.validate(mapping)


def gpu_stack():
    shapes = [{"name": "b200-spot", **B200, "capacity": "spot"},
              {"name": "b200-flex", **B200, "capacity": "flex-start"},
              {"name": "b200-shared", **B200, "capacity": "reservation",
               "reservation": "projects/owner-project/reservations/shared-b200"},
              {"name": "b200", **B200}]  # fmt: skip
    run = {"name": "sql", "trainer": "trl-gpu", "pool": "b200-spot", "ladder": ["b200-flex", "b200-shared", "b200"],
           "data": None, "args": []}  # fmt: skip
    return autopilot(shapes, run)


def test_a_gpu_ladder_lists_every_rung_in_order_with_its_capacity():
    config = gpu_stack()
    [(name, rungs)] = config.compute_classes().items()
    manifest = compute_class(name, rungs)
    assert manifest["apiVersion"] == "cloud.google.com/v1" and manifest["kind"] == "ComputeClass"
    assert manifest["metadata"] == {"name": "finetune-ladder-sql-a39300"}  # the stack's namespace, then the run
    gpu = {"type": "nvidia-b200", "count": 8, "driverVersion": "latest"}
    assert manifest["spec"] == {
        "priorities": [
            {"gpu": gpu, "spot": True},
            {"gpu": gpu, "flexStart": {"enabled": True}},
            {"gpu": gpu, "reservations": {"affinity": "Specific",
                                          "specific": [{"name": "shared-b200", "project": "owner-project"}]}},
            {"gpu": gpu, "spot": False},
        ],
        "whenUnsatisfiable": "DoNotScaleUp",
        "nodePoolAutoCreation": {"enabled": True},
    }  # fmt: skip


def test_a_reservation_of_the_stacks_project_names_no_project():
    config = autopilot([{"name": "b200-mine", **B200, "capacity": "reservation", "reservation": "mine"},
                        {"name": "b200", **B200}],
                       {"trainer": "trl-gpu", "pool": "b200-mine", "ladder": ["b200"], "data": None, "args": []})
    [rungs] = config.compute_classes().values()
    assert capacity_rule(rungs[0]) == {"reservations": {"affinity": "Specific", "specific": [{"name": "mine"}]}}


def test_a_multi_host_tpu_rung_counts_the_chips_of_one_node():
    config = autopilot([{"name": "spot-2x4", **V6E_2X4, "capacity": "spot"}, {"name": "v6e-2x4", **V6E_2X4}],
                       {"pool": "spot-2x4", "ladder": ["v6e-2x4"]})
    [(name, rungs)] = config.compute_classes().items()
    priorities = compute_class(name, rungs)["spec"]["priorities"]
    assert priorities == [{"tpu": {"type": "tpu-v6e-slice", "count": 4, "topology": "2x4"}, "spot": True},
                          {"tpu": {"type": "tpu-v6e-slice", "count": 4, "topology": "2x4"}, "spot": False}]


def test_a_capacity_without_a_priority_rule_is_an_error_not_a_guess():
    config = gpu_stack()
    [rungs] = config.compute_classes().values()
    with pytest.raises(ValueError, match="capacity 'queued' has no ComputeClass priority rule"):
        capacity_rule(dataclasses.replace(rungs[0], capacity="queued"))


def _pod(config, run_name: str) -> tuple[dict, dict]:
    facts = platform_facts(config, offline_images(config))
    manifest = build_runs(config.runs, config.contracts(), facts)[run_name]
    return manifest, manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def test_the_pods_select_the_class_alone():
    """No hard shape or capacity selector beside the class: its rules carry the accelerator."""
    config = gpu_stack()
    manifest, pod = _pod(config, "sql")
    assert pod["nodeSelector"] == {COMPUTE_CLASS_LABEL: "finetune-ladder-sql-a39300"}
    assert not {SPOT_LABEL, FLEX_START_LABEL, RESERVATION_NAME_LABEL} & set(pod["nodeSelector"])
    # Every rung's taints are tolerated: the GPU's and the Spot rung's.
    assert {t["key"] for t in pod["tolerations"]} == {"nvidia.com/gpu", SPOT_LABEL}
    assert not {QUEUE_LABEL, PRIORITY_LABEL} & set(manifest["metadata"]["labels"])
    assert manifest["spec"]["suspend"] is False  # no Kueue to unsuspend it
    assert run_contract(config.runs[0], config.contracts()).compute_class == "finetune-ladder-sql-a39300"


def test_a_run_without_a_ladder_keeps_its_shapes_capacity_labels():
    config = autopilot(reader.model_values(reader.file_values("autopilot", ROOT), "autopilot")["shapes"],
                       {"ladder": []})
    _manifest, pod = _pod(config, "gemma3-single-host")
    assert pod["nodeSelector"][SPOT_LABEL] == "true"
    assert COMPUTE_CLASS_LABEL not in pod["nodeSelector"]
    assert compute_class_manifests(config.compute_classes()) == {}


@pytest.mark.parametrize("stack", shipped_stacks())
def test_compute_class_goldens_match(stack):
    """tests/golden/<stack>/compute-classes/: the stack's ComputeClasses, and no directory for a stack without."""
    directory = goldens.GOLDEN_DIR / stack / goldens.COMPUTE_CLASSES
    expected = goldens.compute_class_manifests_for(stack)
    assert directory.is_dir() == bool(expected)
    on_disk = {p.stem: p.read_text() for p in directory.glob("*.yaml")}
    assert on_disk == {k: to_yaml(m) for k, m in expected.items()}, "run: python -m tests.support.goldens"


def test_the_autopilot_stack_ships_a_ladder():
    assert list(goldens.compute_class_manifests_for("autopilot")) == ["computeclass-finetune-ladder-gemma3-single-host-8edc53"]
