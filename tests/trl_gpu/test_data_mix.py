"""Several datasets in one GPU run (--data_mix): each loaded, split and tokenized with its own format and
columns, the train sets interleaved by weight with datasets' interleave_datasets (seeded, no row
repeated); the entry point trains on a mix; a bad mix exits 78 naming the source and key."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from transformers import AutoTokenizer

from trainers import exit_codes
from trainers.sft_data import mixture
from trainers.trl_gpu import data

from .conftest import FAST, run, sft_command, tail
from .test_sft_formats import _without_sql_flags, _write, support_chat

SHAREGPT = {"system": "system", "user": "human", "assistant": "gpt"}


def _sources(tmp_path, n: int = 60) -> list[dict]:
    chats = _write(tmp_path / "chats.jsonl", [{"messages": support_chat(i)} for i in range(n)])
    shared = _write(tmp_path / "shared.jsonl", [{"conversations": [
        {"from": SHAREGPT[m["role"]], "value": m["content"].replace("Ticket", "Case")} for m in support_chat(i)]}
        for i in range(n)])
    answers = _write(tmp_path / "qa.csv", [{"question": f"order {i} late", "answer": f"Order {i} ships."}
                                           for i in range(n)])
    return [{"path": str(chats), "weight": 2, "format": "conversational"},
            {"path": str(shared), "weight": 1, "format": "sharegpt"},
            {"path": str(answers), "weight": 1, "format": "prompt-completion", "columns": {"completion": "answer"},
             "prompt_template": "Ticket: {question}"}]


def _script(mix, **kw):
    values = {"data_mix": json.dumps(mix), "loss_on": "completion", "dataset_split": "train", "max_samples": 1000,
              "eval_fraction": 0.1}
    return SimpleNamespace(**{**values, **kw})


def test_each_row_of_the_mix_is_tokenized_as_its_own_format_says_and_the_weights_hold(gemma3_dir, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(gemma3_dir)
    mix = _sources(tmp_path)
    train, held_out, eval_rows, spec = data.mixed_splits(_script(mix), 7, tokenizer, None, None)
    sources = mixture.parse(json.dumps(mix), "completion")
    # Every tokenized row of each dataset, as its own settings tokenize it alone.
    expected = {}
    for source in sources:
        for i, record in enumerate(data.load_rows(source.path, "train")):
            row = data.tokenize_example(record, tokenizer, source.spec, i)
            expected[tuple(row["input_ids"])] = (source.path, row["labels"])
    origins = [expected[tuple(row["input_ids"])] for row in train]
    assert all(row["labels"] == labels for row, (_, labels) in zip(train, origins))
    counts = {s.path: sum(1 for path, _ in origins if path == s.path) for s in sources}
    # interleave_datasets draws each row's dataset with the weights' probabilities and stops where one runs
    # out: the conversational set (weight 2 of 4, 54 train rows) runs out first, with about half the mix.
    assert counts[sources[0].path] == 54 and 0.4 < counts[sources[0].path] / len(train) < 0.6, counts
    assert counts[sources[1].path] > 10 and counts[sources[2].path] > 10, counts
    assert len(held_out) == 3 * 6 and len(eval_rows) == 6 and spec == sources[0].spec
    again, *_ = data.mixed_splits(_script(mix), 7, tokenizer, None, None)
    assert again["input_ids"] == train["input_ids"]  # seeded: every restart and rank sees the same order
    other, *_ = data.mixed_splits(_script(mix), 8, tokenizer, None, None)
    assert other["input_ids"] != train["input_ids"]


@pytest.mark.slow
def test_the_entry_point_trains_on_a_mix(gemma3_dir, tmp_path):
    proc = run(sft_command(*_without_sql_flags(FAST), "--model_id", gemma3_dir, "--data_mix",
                           json.dumps(_sources(tmp_path, 40)), "--output_dir", tmp_path / "run", "--max_steps", "6",
                           "--eval_strategy", "no", "--save_steps", "6"))  # fmt: skip
    assert proc.returncode == exit_codes.OK, tail(proc)
    assert "--data_mix source 1 " in proc.output and (tmp_path / "run" / "adapter_model.safetensors").is_file()


def test_a_bad_mix_exits_78_naming_the_source_and_key(gemma3_dir, tmp_path, capsys):
    from trainers.trl_gpu.sft import main

    mix = _sources(tmp_path, 4)
    cases = [
        ([{**mix[0], "weight": -1}, mix[1]], "source 0 (" + mix[0]["path"] + "): weight=-1 is not a positive number"),
        ([mix[0], {**mix[1], "columns": {"prompt": "q"}}],
         "columns='prompt=q' maps 'prompt', which is not a column of format sharegpt"),
        ([mix[0], {**mix[1], "format": "conversational"}],
         "--data_mix source 1='" + mix[1]["path"] + "' with --data_format conversational: row 1: column 'messages' "
         "is missing"),
    ]
    for sources, message in cases:
        code = main([str(a) for a in (*_without_sql_flags(FAST), "--model_id", gemma3_dir, "--data_mix",
                                      json.dumps(sources), "--output_dir", tmp_path / "o")])
        err = capsys.readouterr().err
        assert code == exit_codes.CONFIG_ERROR and message in err, (message, err)
    code = main([str(a) for a in (*_without_sql_flags(FAST), "--model_id", gemma3_dir, "--data_mix", json.dumps(mix),
                                  "--output_dir", tmp_path / "o", "--data_format", "conversational")])
    err = capsys.readouterr().err
    assert code == exit_codes.CONFIG_ERROR and "--data_mix: --data_format set beside it" in err, err


def test_tool_calls_under_gemma_3_s_template_exit_78_with_the_reason(gemma3_dir, tmp_path, capsys):
    from trainers.trl_gpu.sft import main

    call = {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                                                                  "arguments": {"city": "Paris"}}}]}
    rows = [{"messages": support_chat(i)} for i in range(6)]
    rows[0] = {"messages": [{"role": "user", "content": "Weather in Paris?"}, call]}
    chats = _write(tmp_path / "tools.jsonl", rows)
    code = main([str(a) for a in (*_without_sql_flags(FAST), "--model_id", gemma3_dir, "--dataset_name", chats,
                                  "--output_dir", tmp_path / "o", "--data_format", "conversational")])
    err = capsys.readouterr().err
    assert code == exit_codes.CONFIG_ERROR, err
    assert "column 'messages' holds tool calls, and the chat template prints no tool call (it would train an " \
           "empty turn)" in err, err
