"""Token shards written by the staging Job: the same stories, the same batches, the wrong tokenizer refused."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from gemma_jax_helpers import base_args, make_story, run_train
from trainers.gemma_jax import data, token_shards
from trainers.gemma_jax import model as model_lib


@pytest.fixture(scope="module")
def shard_dir(stories_file, tokenizer_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("tokens") / "tokens"
    token_shards.STORIES_PER_FILE, before = 700, token_shards.STORIES_PER_FILE  # several files
    try:
        index = token_shards.write(stories_file, str(out), "tiny", tokenizer_file)
    finally:
        token_shards.STORIES_PER_FILE = before
    assert len(index["shards"]) > 1
    return str(out)


def test_records_are_the_trainer_s_own_tokenization_in_file_order(shard_dir, stories_file, tokenizer_file):
    stories = data.read_stories(stories_file, 10_000)
    source = token_shards.TokenStories(shard_dir)
    assert source.count == len(stories)
    ids = [0, 1, 699, 700, 701, len(stories) - 1]
    expected = data.tokenize([stories[i] for i in ids], lambda: model_lib.load_tokenizer("tiny", tokenizer_file), 0)
    for got, want in zip(source.tokens(ids), expected):
        np.testing.assert_array_equal(got, want)
    index = json.loads((token_shards.Path(shard_dir) / "index.json").read_text())
    assert index["tokens"] == sum(s["tokens"] for s in index["shards"]) and index["stories"] == len(stories)


@pytest.mark.slow
def test_a_run_on_token_shards_trains_on_the_text_file_s_batches(shard_dir, stories_file, tokenizer_file, tmp_path):
    arrays = {}
    for name, path in (("text", stories_file), ("shards", shard_dir)):
        out = tmp_path / f"{name}.npz"
        args = base_args(path, tokenizer_file, tmp_path / f"ckpt-{name}", tmp_path / f"logs-{name}",
                         inspect_batches=3, inspect_out=out, seed=7)
        result = run_train(args)
        assert result.returncode == 0, result.stderr[-2000:]
        arrays[name] = dict(np.load(out))
    assert set(arrays["text"]) == set(arrays["shards"]) >= {"input_tokens", "target_tokens", "segment_ids"}
    for key in arrays["text"]:
        np.testing.assert_array_equal(arrays["text"][key], arrays["shards"][key], err_msg=key)


def test_shards_of_another_tokenizer_are_refused_with_exit_78(shard_dir, stories_file, tmp_path):
    import sentencepiece as spm

    r = random.Random(5)
    prefix = str(tmp_path / "other")
    spm.SentencePieceTrainer.train(sentence_iterator=iter([make_story(r, 5) for _ in range(300)]),
                                   model_prefix=prefix, vocab_size=150, hard_vocab_limit=False, model_type="bpe",
                                   pad_id=0, eos_id=1, bos_id=2, unk_id=3, minloglevel=2)
    args = base_args(shard_dir, prefix + ".model", tmp_path / "ckpt", tmp_path / "logs", inspect_batches=1,
                     inspect_out=tmp_path / "b.npz")
    result = run_train(args)
    assert result.returncode == 78, result.stderr[-2000:]
    assert "not this run's" in result.stderr


def test_the_entry_point_refuses_a_missing_text_file(tmp_path):
    assert token_shards.main(["--text", str(tmp_path / "none.txt"), "--out", str(tmp_path / "t"),
                              "--model", "tiny"]) == 78
