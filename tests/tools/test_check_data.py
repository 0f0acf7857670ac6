"""`make check-data` (python -m tools.data check): every row of a run's local data read as its trainer
reads it, with the bad rows, the split and its warnings, and examples with the trained text marked."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from tests.support.pulumi_harness import ROOT
from tools.data.__main__ import main

GOOD = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]}


def _stack(tmp_path, rows, run=None, dataset=None, base="dev"):
    """A copy of the dev stack whose run reads `rows` from a local file."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    data = tmp_path / "tickets" / "train.jsonl"
    data.parent.mkdir()
    data.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    doc = yaml.safe_load((ROOT / f"Pulumi.{base}.yaml").read_text())
    doc["config"]["gke-finetune:datasets"] = [dataset or {"name": "tickets", "path": "tickets"}]  # inside the project, as paths must be
    doc["config"]["gke-finetune:runs"] = [{"name": "chat", "trainer": "gemma-jax", "pool": "v6e-1x1",
                                           "data": "tickets", "format": "conversational",
                                           "args": ["--batch_size", "8", "--eval_stories", "4"], **(run or {})}]
    doc["config"].pop("gke-finetune:serve", None)  # it names a run of the copied stack, replaced here
    (tmp_path / "Pulumi.t.yaml").write_text(yaml.safe_dump(doc))
    return tmp_path


def _check(capsys, root, *extra):
    code = main(["check", "--stack", "t", "--run", "chat", "--root", str(root), "--quiet", *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_good_data_reports_rows_lengths_the_split_and_marked_examples(tmp_path, capsys):
    code, out, _ = _check(capsys, _stack(tmp_path, [GOOD] * 20))
    assert code == 0, out
    assert "tickets/train.jsonl: 20 rows" in out
    assert "split: 16 rows to train, 4 held out (the first 4 records held out, global batch 8" in out
    assert "<user> Hi\n<assistant> [[Hello.]]\n" in out  # the assistant's turn is trained, the user's not
    assert "WARNING" not in out


def test_every_bad_row_is_listed_as_file_row_column_up_to_the_limit_then_counted(tmp_path, capsys):
    rows = [GOOD] + [{"messages": [{"role": "human", "content": "Hi"}]}] * 30 + ["{broken"]
    code, out, _ = _check(capsys, _stack(tmp_path, rows), "--limit", "3")
    assert code == 65
    assert "bad rows (31):" in out and "... and 28 more" in out
    assert "  tickets/train.jsonl:2: column 'messages' message 0 has role 'human'; " \
           "expected one of the roles system, user, assistant, tool" in out
    code, out, _ = _check(capsys, _stack(tmp_path / "b", [GOOD, "{broken"]), "--json")
    report = json.loads(out)
    assert code == 65 and report["bad_rows"][0].startswith("tickets/train.jsonl: can't be read as records after "
                                                           "row 1:") and "line 2 is not JSON" in report["bad_rows"][0]


@pytest.mark.parametrize("rows, args, warning", [
    (3, ["--eval_stories", "4"], "the eval split takes 4 rows and the data has 3: nothing is left to train on"),
    (10, ["--eval_stories", "4", "--batch_size", "8"], "6 rows are left to train on, less than one batch of 8"),
    (20, ["--eval_stories", "4", "--batch_size", "8", "--steps", "10"],
     "10 steps of 8 take 80 examples and 16 rows are left to train on: the data is repeated 5.0 times"),
])  # fmt: skip
def test_a_split_that_leaves_too_little_to_train_is_warned_of(tmp_path, capsys, rows, args, warning):
    code, out, _ = _check(capsys, _stack(tmp_path, [GOOD] * rows, run={"args": args}), "--json")
    assert code == 0 and any(w.startswith(warning) for w in json.loads(out)["warnings"]), out


def test_the_gpu_trainer_s_fraction_split_and_loss_all(tmp_path, capsys):
    rows = [{"question": f"q{i}", "answer": f"a{i}"} for i in range(10)]
    run = {"trainer": "trl-gpu", "pool": "a4", "format": "prompt-completion", "columns": {"prompt": "question",
                                                                            "completion": "answer"},
           "loss": "all", "args": ["--eval_fraction", "0.25"]}
    root = _stack(tmp_path, rows, run=run, base="a4")
    code, out, _ = _check(capsys, root, "--json")
    report = json.loads(out)
    assert code == 0, out
    assert report["split"]["batch"] == 8 * 8 * 8  # per device x accumulation x the A4's 8 GPUs
    assert report["split"]["eval_rows"] == 3 and report["split"]["train_rows"] == 7  # rounded up, as datasets does
    assert report["examples"][0]["parts"] == [["q0", True], ["a0", True]]


def test_data_staged_in_the_cluster_is_named_and_not_read(tmp_path, capsys):
    dataset = {"name": "tickets", "url": "https://example.com/train.jsonl"}
    code, _, err = _check(capsys, _stack(tmp_path, [GOOD], dataset=dataset))
    assert code == 69
    assert "run 'chat' reads URL https://example.com/train.jsonl, staged in the cluster and not read on this " \
           "machine" in err


def test_an_unknown_run_or_stack(tmp_path, capsys):
    root = _stack(tmp_path, [GOOD])
    assert main(["check", "--stack", "t", "--run", "nope", "--root", str(root), "--quiet"]) == 66
    assert "run 'nope' is not one of stack t's runs: chat" in capsys.readouterr().err
    assert main(["check", "--stack", "missing", "--run", "chat", "--root", str(root), "--quiet"]) == 66
