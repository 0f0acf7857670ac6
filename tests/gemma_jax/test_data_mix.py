"""Several datasets in one JAX run (--data_mix): each read with its own format and columns, mixed by weight
with grain's MapDataset.mix, each record trained exactly as alone; a mixed run resumes exactly; a bad
source exits 78 naming it."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from gemma_jax_helpers import load_params, max_abs_diff, run_train
from test_sft_data import _args, _expected, _segments, _trained_runs, _write, chat_tokenizer, qa, support_chat  # noqa: F401
from tests.support.checkpoints import stopped_after
from trainers import exit_codes
from trainers.sft_data import formats

SHAREGPT_ROLE = {"system": "system", "user": "human", "assistant": "gpt"}


def _sharegpt(i: int) -> dict:
    return {"turns": [{"from": SHAREGPT_ROLE[m["role"]], "value": m["content"].replace("Ticket", "Case")}
                      for m in support_chat(i)]}


def _sources(tmp_path):
    chats = _write(tmp_path / "chats.jsonl", [{"messages": support_chat(i)} for i in range(200)])
    shared = _write(tmp_path / "shared.jsonl", [_sharegpt(i) for i in range(200)])
    answers = _write(tmp_path / "qa.csv", [qa(i) for i in range(200)])
    mix = [{"path": str(chats), "weight": 2, "format": "conversational"},
           {"path": str(shared), "weight": 1, "format": "sharegpt", "columns": {"conversations": "turns"}},
           {"path": str(answers), "weight": 1, "format": "prompt-completion", "columns": "completion=answer",
            "prompt_template": "Q: {question}"}]
    records = [[{"messages": support_chat(i)} for i in range(200)], [_sharegpt(i) for i in range(200)],
               [{k: str(v) for k, v in qa(i).items()} for i in range(200)]]
    specs = [formats.Spec.of("conversational"), formats.Spec.of("sharegpt", {"conversations": "turns"}),
             formats.Spec.of("prompt-completion", {"completion": "answer"}, "Q: {question}")]
    return mix, records, specs


def _mix_args(tmp_path, mix, tokenizer, ckpt, **kw):
    return _args(str(tmp_path / "unused"), tokenizer, ckpt, tmp_path / "l", data_format="text",
                 data_mix=json.dumps(mix), **kw)


def test_each_record_of_a_mix_trains_as_its_own_format_says_in_the_weights_proportions(chat_tokenizer, tmp_path):
    from trainers.gemma_jax import data  # pylint: disable=g-import-not-at-top

    mix, records, specs = _sources(tmp_path)
    order = data.mix_records(records, [2, 1, 1])
    counts = np.bincount([source for _, _, source in order[:200]], minlength=3)
    assert counts.tolist() == [100, 50, 50] and order == data.mix_records(records, [2, 1, 1])  # deterministic
    out = tmp_path / "b.npz"
    res = run_train(_mix_args(tmp_path, mix, chat_tokenizer, tmp_path / "c", inspect_batches=12, inspect_out=out,
                              datacount=150, eval_stories=8))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "--data_mix: 158 records from" in res.stdout, res.stdout
    segments = _segments(dict(np.load(out)))
    assert len(segments) > 12
    seen = set()
    for tokens, weights, record_id in segments:
        row, _, source = order[record_id]
        seen.add(source)
        _, ids, mask, tokenizer = _expected(specs[source], records[source][row - 1], chat_tokenizer)
        assert tokens.tolist() == ids.tolist()
        assert weights[:-1].tolist() == mask[1:].astype(np.float32).tolist()
        trained = [tokenizer.decode(run) for run in _trained_runs(ids, weights)]
        if source == 2:
            assert trained == [records[2][row - 1]["answer"] + "<end_of_turn>"]
        else:
            assert trained[-1] == "You are welcome.<end_of_turn>" and len(trained) == 2
    assert seen == {0, 1, 2}


def test_a_mixed_run_resumes_exactly(chat_tokenizer, tmp_path):
    mix, _, _ = _sources(tmp_path)
    kw = {"datacount": 150, "eval_stories": 8, "save_every": 3}
    whole = run_train(_mix_args(tmp_path, mix, chat_tokenizer, tmp_path / "whole", steps=6, **kw))
    assert whole.returncode == 0, whole.stdout + whole.stderr
    # Stopped after step 3's checkpoint, restarted to step 6.
    stopped_after(tmp_path / "whole" / "3", tmp_path / "resumed")
    rest = run_train(_mix_args(tmp_path, mix, chat_tokenizer, tmp_path / "resumed", steps=6, **kw))
    assert rest.returncode == 0 and "resumed from step 3" in rest.stdout, rest.stdout + rest.stderr
    assert max_abs_diff(load_params(str(tmp_path / "whole"), 6), load_params(str(tmp_path / "resumed"), 6)) == 0
    # Another mix is another run: the checkpoint's data settings refuse it.
    other = run_train(_mix_args(tmp_path, [{**mix[0], "weight": 1}, *mix[1:]], chat_tokenizer, tmp_path / "resumed",
                                steps=8, **kw))
    assert other.returncode == exit_codes.CONFIG_ERROR and "--data_mix: checkpoint has" in other.stderr, other.stderr


def test_a_bad_mix_is_refused_at_start_up_naming_the_source_and_key(chat_tokenizer, tmp_path):
    from trainers.gemma_jax import cli  # pylint: disable=g-import-not-at-top

    mix, _, _ = _sources(tmp_path)
    cases = [
        ([{**mix[0], "weight": 0}, mix[1]], "source 0 (" + mix[0]["path"] + "): weight=0 is not a positive number"),
        ([{**mix[0], "format": "chat"}, mix[1]], "format='chat' is not a data format"),
        ([mix[0], {**mix[1], "path": str(tmp_path / "nowhere.jsonl")}], "source 1 path="),
        ([mix[0]], "not a list of at least two sources"),
    ]
    for sources, message in cases:
        with pytest.raises(cli.ConfigError, match=re.escape(message)):
            cli.parse_args(_mix_args(tmp_path, sources, chat_tokenizer, tmp_path / "c"))
    with pytest.raises(cli.ConfigError, match="--columns set beside it"):
        cli.parse_args(_mix_args(tmp_path, mix, chat_tokenizer, tmp_path / "c", columns="messages=chat"))


def test_a_bad_row_of_one_source_exits_78_naming_its_file(chat_tokenizer, tmp_path):
    mix, _, _ = _sources(tmp_path)
    sources = [mix[0], {"path": mix[1]["path"], "weight": 1, "format": "conversational"}]
    res = run_train(_mix_args(tmp_path, sources, chat_tokenizer, tmp_path / "c", datacount=20, eval_stories=2))
    assert res.returncode == exit_codes.CONFIG_ERROR
    assert f"--data_mix: {mix[1]['path']} (format conversational): row 1: column 'messages' is missing" \
        in res.stderr, res.stderr
