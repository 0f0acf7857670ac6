"""Your own data in the JAX trainer: conversational and prompt-completion records from JSON Lines,
CSV and Parquet, rendered with Gemma's chat template, packed as stories are, with the loss on exactly
the assistant's turns; a run that trains on them and resumes exactly; the refusals (exit 78).

The tokenizer is trained here with Gemma's turn markers as user-defined pieces and its control pieces
at Gemma's ids; the real tokenizer and weights are in test_real_weights.py."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from gemma_jax_helpers import base_args, load_params, max_abs_diff, run_train
from tests.support.checkpoints import stopped_after
from trainers import exit_codes
from trainers.sft_data import formats, parts

MARKERS = ["<start_of_turn>", "<end_of_turn>", "<|turn>", "<turn|>", "<|channel>", "<channel|>"]
COUNTRIES = ["France", "Japan", "Italy", "Spain", "Egypt", "Peru", "Kenya", "Chile"]


def support_chat(i: int) -> list[dict]:
    country = COUNTRIES[i % len(COUNTRIES)]
    return [{"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": f"Ticket {i}: where does order {i % 10} ship from?"},
            {"role": "assistant", "content": f"Order {i % 10} ships from {country}."},
            {"role": "user", "content": "Thanks."},
            {"role": "assistant", "content": "You are welcome."}]  # fmt: skip


def qa(i: int) -> dict:
    return {"question": f"Where does order {i % 10} ship from?", "answer": f"From {COUNTRIES[i % 8]}."}


@pytest.fixture(scope="session")
def chat_tokenizer(workdir) -> str:
    """A SentencePiece model with Gemma's layout (pad 0, eos 1, bos 2, unk 3), normalization and turn markers."""
    import sentencepiece as spm  # pylint: disable=g-import-not-at-top

    corpus = [m["content"] for i in range(300) for m in support_chat(i)] + [
        f"{q['question']} {q['answer']}" for q in map(qa, range(50))]
    prefix = str(workdir / "chat_tok")
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus), model_prefix=prefix, vocab_size=420, hard_vocab_limit=False,
        model_type="bpe", pad_id=0, eos_id=1, bos_id=2, unk_id=3, pad_piece="<pad>", eos_piece="<eos>",
        bos_piece="<bos>", user_defined_symbols=MARKERS, minloglevel=2,
        # Gemma's: text as it is (newlines, runs of spaces), no space added in front, bytes for the rest.
        normalization_rule_name="identity", add_dummy_prefix=False, remove_extra_whitespaces=False,
        byte_fallback=True,
    )  # fmt: skip
    return prefix + ".model"


def _write(path, rows):
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif path.suffix == ".csv":
        import csv  # pylint: disable=g-import-not-at-top

        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    else:
        import pyarrow as pa  # pylint: disable=g-import-not-at-top
        import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top

        pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.fixture(scope="module")
def chats(workdir):
    return str(_write(workdir / "chats.jsonl", [{"messages": support_chat(i)} for i in range(400)]))


def _args(data, tokenizer, ckpt, logs, **overrides):
    kw = {"data_format": "conversational", "datacount": 300, "eval_stories": 16, "maxlen": 96, "batch_size": 8,
          "steps": 12, "learning_rate": 1e-2}
    kw.update(overrides)
    return base_args(data, tokenizer, ckpt, logs, **kw)


def _expected(spec, record, tokenizer_file):
    from trainers.gemma_jax import examples, model as model_lib  # pylint: disable=g-import-not-at-top
    from trainers.sft_data import chat  # pylint: disable=g-import-not-at-top

    tokenizer = model_lib.load_tokenizer("tiny", tokenizer_file)
    template = chat.ChatTemplate.named("gemma3", "<bos>", "<eos>")
    example = parts.example(spec, record, template.render, 1)
    return example, *examples.tokenize_example(example, tokenizer), tokenizer


def _trained_runs(ids, weights) -> list[list[int]]:
    """The runs of consecutive trained target tokens (target of slot t: token t+1)."""
    runs, current = [], []
    for t in range(len(ids) - 1):
        if weights[t]:
            current.append(int(ids[t + 1]))
        elif current:
            runs.append(current)
            current = []
    return runs + ([current] if current else [])


def _segments(batches):
    """(tokens, target weights) of every segment of every row."""
    out = []
    for n in range(batches["input_tokens"].shape[0]):
        for r in range(batches["input_tokens"].shape[1]):
            seg = batches["segment_ids"][n, r]
            for s in sorted(set(seg[seg > 0].tolist())):
                idx = np.nonzero(seg == s)[0]
                out.append((batches["input_tokens"][n, r, idx], batches["loss_weights"][n, r, idx],
                            int(batches["story"][n, r, idx[0]])))
    return out


def test_a_chat_is_packed_whole_and_trains_exactly_its_assistant_turns(chats, chat_tokenizer, tmp_path):
    out = tmp_path / "b.npz"
    res = run_train(_args(chats, chat_tokenizer, tmp_path / "c", tmp_path / "l", inspect_batches=2,
                          inspect_out=out))
    assert res.returncode == 0, res.stdout + res.stderr
    batches = dict(np.load(out))
    spec = formats.Spec.of("conversational")
    segments = _segments(batches)
    assert len(segments) > 8  # several chats per row
    records = [json.loads(line) for line in open(chats)]
    for tokens, weights, record_id in segments:
        example, ids, mask, tokenizer = _expected(spec, records[record_id], chat_tokenizer)
        assert len(ids) <= 96 and tokens.tolist() == ids.tolist()  # whole: no chat shorter than a row is split
        # The target of slot t is token t+1: weighted exactly where the mask trains that token.
        assert weights[:-1].tolist() == mask[1:].astype(np.float32).tolist() and weights[-1] == 0
        answers = [m["content"] for m in records[record_id]["messages"] if m["role"] == "assistant"]
        assert [tokenizer.decode(run) for run in _trained_runs(ids, weights)] == [f"{a}<end_of_turn>" for a in answers]
        assert tokenizer.decode(ids.tolist()).startswith("<start_of_turn>user\nAnswer briefly.\n\nTicket")


def test_prompt_completion_from_csv_and_parquet_with_a_prompt_template(chat_tokenizer, tmp_path):
    rows = [qa(i) for i in range(120)]
    spec = formats.Spec.of("prompt-completion", {"completion": "answer"}, "Q: {question}")
    for suffix in (".csv", ".parquet"):
        data = _write(tmp_path / f"qa{suffix}", rows)
        out = tmp_path / f"b{suffix}.npz"
        res = run_train(_args(data, chat_tokenizer, tmp_path / f"c{suffix}", tmp_path / "l", inspect_batches=1,
                              inspect_out=out, data_format="prompt-completion", columns="completion=answer",
                              prompt_template="Q: {question}", datacount=100, eval_stories=4))  # fmt: skip
        assert res.returncode == 0, res.stdout + res.stderr
        for tokens, weights, record_id in _segments(dict(np.load(out))):
            _, ids, mask, tokenizer = _expected(spec, rows[record_id], chat_tokenizer)
            assert tokens.tolist() == ids.tolist()
            assert [tokenizer.decode(run) for run in _trained_runs(ids, weights)] == [
                rows[record_id]["answer"] + "<end_of_turn>"]


def test_a_conversational_run_learns_and_resumes_exactly(chats, chat_tokenizer, tmp_path):
    whole = run_train(_args(chats, chat_tokenizer, tmp_path / "whole", tmp_path / "l1", save_every=6,
                            eval_every=12), timeout=600)  # fmt: skip
    assert whole.returncode == 0, whole.stdout + whole.stderr
    losses = [float(x) for x in __import__("re").findall(r"\[eval\] step \d+ loss=([0-9.]+)", whole.stdout)]
    assert len(losses) == 2 and losses[1] < 0.6 * losses[0], whole.stdout
    # A run stopped after step 6's checkpoint, restarted to step 12.
    stopped_after(tmp_path / "whole" / "6", tmp_path / "resumed")
    rest = run_train(_args(chats, chat_tokenizer, tmp_path / "resumed", tmp_path / "l2", save_every=6))
    assert rest.returncode == 0 and "resumed from step 6" in rest.stdout, rest.stdout + rest.stderr
    assert max_abs_diff(load_params(str(tmp_path / "whole"), 12), load_params(str(tmp_path / "resumed"), 12)) == 0
    # The data settings are part of what a checkpoint means: other ones are refused.
    other = run_train(_args(chats, chat_tokenizer, tmp_path / "resumed", tmp_path / "l2", steps=14,
                            loss_on="all"))
    assert other.returncode == exit_codes.CONFIG_ERROR and "--loss_on: checkpoint has 'completion', now 'all'" \
        in other.stderr, other.stderr


def test_a_mapping_to_a_column_the_file_lacks_exits_78_naming_column_and_row(chat_tokenizer, tmp_path):
    rows = [qa(i) for i in range(20)]
    rows[5] = {"question": "no answer here"}
    data = _write(tmp_path / "qa.jsonl", rows)
    res = run_train(_args(data, chat_tokenizer, tmp_path / "c", tmp_path / "l", data_format="prompt-completion",
                          columns="prompt=question,completion=reply", datacount=10, eval_stories=2))
    assert res.returncode == exit_codes.CONFIG_ERROR
    assert "row 1: column 'reply' is missing (the row has ['answer', 'question'])" in res.stderr, res.stderr
    res = run_train(_args(data, chat_tokenizer, tmp_path / "c", tmp_path / "l", data_format="prompt-completion",
                          columns="prompt=question,completion=answer", datacount=10, eval_stories=2))
    assert res.returncode == exit_codes.CONFIG_ERROR and "row 6: column 'answer' is missing" in res.stderr


def test_bad_data_settings_exit_78_before_reading_anything(chats, chat_tokenizer, tmp_path, capsys):
    """The entry point's main() in this process (its process exits with what main returns: test_train.py)."""
    from trainers.gemma_jax import train  # pylint: disable=g-import-not-at-top

    for overrides, message in [({"data_format": "chat"}, "--data_format: 'chat' is not one of"),
                               ({"columns": "messages"}, "--columns: 'messages' is not <standard name>=<column>"),
                               ({"prompt_template": "{q}"}, "prompt_template='{q}' builds a prompt"),
                               ({"chat_template": "gemma9"}, "--chat_template=gemma9")]:
        code = train.main(_args(chats, chat_tokenizer, tmp_path / "c", tmp_path / "l", **overrides))
        err = capsys.readouterr().err
        assert code == exit_codes.CONFIG_ERROR and message in err, (overrides, err)
        assert not (tmp_path / "c").exists()  # nothing started


def test_the_31b_template_trains_the_answer_after_its_empty_thought_block(chat_tokenizer):
    """Gemma 4 31B's generation prompt ends with an empty thought block, which its past turns lack: the
    last answer follows it, as at inference, and only the answer and <turn|> are trained."""
    from trainers.gemma_jax import examples, model as model_lib  # pylint: disable=g-import-not-at-top
    from trainers.sft_data import chat  # pylint: disable=g-import-not-at-top

    tokenizer = model_lib.load_tokenizer("tiny", chat_tokenizer)
    template = chat.ChatTemplate.named("gemma4-31b", "<bos>", "<eos>")
    example = parts.example(formats.Spec.of("conversational"), {"messages": support_chat(5)}, template.render, 1)
    ids, mask = examples.tokenize_example(example, tokenizer)
    runs, current = [], []
    for token, trained in zip(ids.tolist(), mask.tolist()):
        if trained:
            current.append(token)
        elif current:
            runs.append(current)
            current = []
    runs.append(current)
    assert [tokenizer.decode(r) for r in runs] == ["Order 5 ships from Peru.<turn|>", "You are welcome.<turn|>"]
    last = "".join(text for text, trained in example.parts[:-1])
    assert last.endswith("<|turn>model\n<|channel>thought\n<channel|>")
    assert last.count("<|channel>") == 1  # the earlier turn, as history, has none


def test_text_records_and_loss_on_all_carry_no_loss_mask(chat_tokenizer, tmp_path):
    """Formats that train every token batch exactly as stories do: no loss_mask (the same program)."""
    data = _write(tmp_path / "notes.jsonl", [{"body": f"Order {i} ships from {COUNTRIES[i % 8]}."} for i in range(120)])
    for overrides in ({"data_format": "text", "columns": "text=body"},
                      {"data_format": "conversational", "loss_on": "all"}):
        source = data if overrides["data_format"] == "text" else _write(
            tmp_path / "c.jsonl", [{"messages": support_chat(i)} for i in range(120)])
        out = tmp_path / f"{overrides['data_format']}.npz"
        res = run_train(_args(source, chat_tokenizer, tmp_path / "c", tmp_path / "l", inspect_batches=1,
                              inspect_out=out, datacount=100, eval_stories=4, **overrides))
        assert res.returncode == 0, res.stdout + res.stderr
        batch = dict(np.load(out))
        assert "loss_mask" not in batch
        seg = batch["segment_ids"][0]
        assert (batch["loss_weights"][0][:, :-1] == ((seg[:, 1:] == seg[:, :-1]) & (seg[:, 1:] != 0))).all()
