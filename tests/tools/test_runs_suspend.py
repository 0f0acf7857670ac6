"""`make cancel` / `make resume`: the stack file edited in place, one line, comments and layout kept, read back
the same but for the run's `suspend`; the targeted `pulumi up` names the run's JobSet by the URN the program
gives it."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest
import yaml

from core.names import PROJECT
from tests.support.pulumi_harness import ROOT, run_stack
from tools import stacks
from tools.runs.suspend import RUNS_KEY, EditError, apply_command, edit

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"


def _stack_runs() -> list[tuple[str, str]]:
    out = []
    for stack in stacks.shipped(ROOT):
        runs = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"].get(RUNS_KEY) or []
        out += [(stack, r["name"]) for r in runs]
    return out


def _changed(old: str, new: str) -> list[str]:
    return [line for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


@pytest.mark.parametrize("stack,run", _stack_runs())
def test_cancel_adds_one_line_and_resume_gives_the_file_back(stack, run):
    path = ROOT / f"Pulumi.{stack}.yaml"
    original = path.read_text()
    cancelled = edit(original, path, run, suspend=True)
    assert cancelled.changed
    [added] = _changed(original, cancelled.text)
    assert added.strip() == "+suspend: true" or added.strip().endswith("suspend: true")
    entry = next(r for r in yaml.safe_load(cancelled.text)["config"][RUNS_KEY] if r["name"] == run)
    assert entry["suspend"] is True
    assert cancelled.text.splitlines()[cancelled.line - 1].strip() == "suspend: true"
    assert edit(cancelled.text, path, run, suspend=True).changed is False  # cancelling twice changes nothing
    resumed = edit(cancelled.text, path, run, suspend=False)
    assert resumed.changed and resumed.text == original


def test_the_a4_args_that_span_three_lines_stay_as_written():
    path = ROOT / "Pulumi.a4.yaml"
    original = path.read_text()
    wrapped = [line for line in original.splitlines() if "--per_device_train_batch_size" in line]
    new = edit(original, path, "gemma4-sql", suspend=True).text
    assert wrapped and all(line in new.splitlines() for line in wrapped)
    assert all(line in new for line in original.splitlines() if line.lstrip().startswith("#"))


def test_an_existing_suspend_false_is_flipped_in_place():
    text = "# mine\nconfig:\n  gke-finetune:runs:\n    - name: a   # first\n      suspend: false  # kept\n      trainer: gemma-jax\n"
    new = edit(text, Path("Pulumi.x.yaml"), "a", suspend=True).text
    assert new == text.replace("suspend: false  # kept", "suspend: true  # kept")
    back = edit(new, Path("Pulumi.x.yaml"), "a", suspend=False).text
    assert back == "# mine\nconfig:\n  gke-finetune:runs:\n    - name: a   # first\n      trainer: gemma-jax\n"


def test_flow_mappings_and_json_files_are_edited_in_their_own_style():
    flow = "config:\n  gke-finetune:runs:\n    - {name: a, trainer: gemma-jax}\n    - {name: 'b', pool: p}\n"
    assert edit(flow, Path("Pulumi.x.yaml"), "b", True).text.splitlines()[3] == "    - {name: 'b', suspend: true, pool: p}"
    as_json = json.dumps({"config": {f"{PROJECT}:runs": [{"name": "a", "trainer": "t"}, {"name": "b"}]}}, indent=1)
    cancelled = edit(as_json, Path("Pulumi.x.yaml"), "b", True).text
    assert json.loads(cancelled)["config"][f"{PROJECT}:runs"][1] == {"name": "b", "suspend": True}
    assert edit(cancelled, Path("Pulumi.x.yaml"), "b", False).text == as_json  # resume undoes cancel
    flow_cancelled = edit(flow, Path("Pulumi.x.yaml"), "b", True).text
    assert edit(flow_cancelled, Path("Pulumi.x.yaml"), "b", False).text == flow
    # A key written first in a flow mapping (by hand) is set false: nothing else of the line moves.
    first = "config:\n  gke-finetune:runs:\n    - {suspend: true, name: a}\n"
    assert edit(first, Path("Pulumi.x.yaml"), "a", False).text == first.replace("true", "false")


def test_a_run_the_file_does_not_declare_is_refused_naming_the_runs():
    path = ROOT / "Pulumi.tpu-queued.yaml"
    with pytest.raises(EditError, match=r"'nope' is not a run of Pulumi.tpu-queued.yaml; runs: gemma3-ladder, "
                                        r"gemma3-single-host"):
        edit(path.read_text(), path, "nope", True)


def test_an_edit_that_would_change_more_than_the_key_is_refused():
    # A `name` value whose end the editor can't find as a plain scalar: the read-back check catches it.
    text = 'config:\n  gke-finetune:runs:\n    - {name: "a", trainer: "t"}\n'
    assert "suspend" in edit(text, Path("Pulumi.x.yaml"), "a", True).text
    broken = "config:\n  gke-finetune:runs:\n    - {name: a b, trainer: t}\n"
    with pytest.raises(EditError):
        edit(broken, Path("Pulumi.x.yaml"), "a b", True)


def test_the_targeted_up_names_the_urn_the_program_gives_the_jobset():
    [jobset] = run_stack("dev").of_type(JOBSET)
    command = apply_command("dev", "gemma3-single-host")
    assert command[:2] == ["pulumi", "up"] and "--yes" in command
    assert command[command.index("--target") + 1] == jobset.urn
