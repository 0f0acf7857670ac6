"""A run's own data on this machine (`path:`) is read before anything is declared: the first rows of
each file against the run's format, the way its trainer reads them (admission/local_data.py)."""

from __future__ import annotations

import json

import pytest

from admission import local_data
from stack.problems import ConfigError
from stack.reader import load_files
from tests.support.checkout import linked_checkout
from tests.support.pulumi_harness import ROOT, declared_before_error, run_stack

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
GOOD = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]}


def _write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def tree(tmp_path):
    """A checkout of its own: a `path:` dataset lies inside the project (data/), where the program runs."""
    return linked_checkout(tmp_path)


def _overrides(path, data="tickets", **run):
    """The dev stack's run reading dataset `tickets` at `path`, a folder data/<name> of a checkout."""
    return {"gke-finetune:datasets": [{"name": "tickets", "path": path.relative_to(path.parents[1]).as_posix()}],
            "gke-finetune:runs": [{"name": "chat", "trainer": "gemma-jax", "pool": "v6e-1x1", "data": data,
                                   "format": "conversational", "args": ["--batch_size", "32"], **run}]}


@pytest.mark.parametrize("row, expected", [
    ({"conversation": GOOD["messages"]}, "tickets/train.jsonl:2: column 'messages' is missing (the row has "
                                         "['conversation']); expected a list of messages"),
    ({"messages": [{"role": "human", "content": "Hi"}]}, "tickets/train.jsonl:2: column 'messages' message 0 has "
                                                         "role 'human'; expected one of the roles system, user, "
                                                         "assistant, tool"),
    ({"messages": [{"role": "user", "content": "Hi"}]}, "tickets/train.jsonl:2: column 'messages' ends with a "
                                                        "user message"),
])  # fmt: skip
def test_a_bad_row_in_the_first_rows_is_refused_before_the_upload_is_declared(tree, row, expected):
    path = _write(tree / "data" / "tickets" / "train.jsonl", [GOOD, row, GOOD])
    declared, err = declared_before_error("dev", overrides=_overrides(tree / "data" / "tickets"), root=tree)
    assert isinstance(err, ConfigError) and declared.resources == []
    [problem] = [p for p in err.problems if p.startswith("runs[0].data")]
    assert problem.startswith(f"runs[0].data: 'tickets' on run 'chat' (format conversational): {expected}"), problem
    assert problem.endswith("`make check-data STACK=dev RUN=chat` lists every bad row"), problem
    assert path.exists()


def test_only_the_files_the_run_reads_are_checked_and_a_column_mapping_applies(tree):
    folder = tree / "data" / "tickets"
    _write(folder / "train.jsonl", [{"chat": GOOD["messages"]}])
    _write(folder / "other" / "notes.jsonl", [{"unrelated": 1}])  # in the dataset, not read by the run
    deployed = run_stack("dev", root=tree,
                         overrides=_overrides(folder, data="tickets/train.jsonl", columns={"messages": "chat"}))
    assert deployed.of_type(JOBSET)
    declared, err = declared_before_error("dev", overrides=_overrides(folder, data="tickets"), root=tree)
    assert isinstance(err, ConfigError)
    bad = [p for p in err.problems if p.startswith("runs[0].data")]
    assert any("tickets/other/notes.jsonl:1: column 'messages' is missing" in p for p in bad), bad
    assert any("tickets/train.jsonl:1: column 'messages' is missing" in p for p in bad), bad


def test_a_file_that_is_not_json_lines_and_a_path_naming_no_data_file_are_refused(tree):
    folder = tree / "data" / "tickets"
    _write(folder / "train.jsonl", [GOOD])
    (folder / "train.jsonl").write_text(json.dumps(GOOD) + "\n{not json\n")
    _, err = declared_before_error("dev", overrides=_overrides(folder), root=tree)
    assert any("tickets/train.jsonl: can't be read as records after row 1: " in p and "line 2 is not JSON" in p
               for p in err.problems), err.problems
    _, err = declared_before_error("dev", overrides=_overrides(folder, data="tickets/valid.jsonl"), root=tree)
    assert any(p.startswith("runs[0].data: 'tickets/valid.jsonl' on run 'chat' names no data file of dataset "
                            "'tickets'") for p in err.problems), err.problems


def test_only_the_first_rows_are_read_by_the_plan(tree):
    rows = [GOOD] * 100 + [{"text": "row 101 is read by make check-data, not by the plan"}]
    _write(tree / "data" / "tickets" / "train.jsonl", rows)
    assert run_stack("dev", overrides=_overrides(tree / "data" / "tickets"), root=tree).of_type(JOBSET)
    config = load_files("dev", ROOT)
    run = config.runs[0]
    # the shipped stack's data is staged in the cluster
    assert local_data.local_sources(config, run) == [("data", run.data, None)]


def test_the_trainer_table_s_default_model_is_the_family_template_trainer_s_own_default():
    """known_template falls back on the trainer table's default model: it must be the one the trainer takes."""
    import dataclasses
    import importlib

    from core.trainers import TRAINERS

    rows = [row for row in TRAINERS.values() if row.model_flags and row.model_flags.family_template]
    assert rows
    for row in rows:
        flags = importlib.import_module(row.flags_module)
        field = next(f for f in dataclasses.fields(flags.Flags) if f.name == row.model_flags.model.lstrip("-"))
        assert flags.default_of(field) == row.model_flags.default_model
