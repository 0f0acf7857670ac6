"""Input pipeline (TinyStories parsing, sharding, packing, loss masks) and
the model registry."""

from __future__ import annotations

import random

import numpy as np
import pytest

import gemma_jax_helpers  # noqa: F401  (puts the repo on sys.path)
from trainers.gemma_jax import data
from trainers.gemma_jax import metrics
from trainers.gemma_jax import model as model_lib
from trainers.gemma_jax import steps


def _shard(index, ids, token_lists):
    return data.Shard(index, np.asarray(ids), [np.asarray(t, np.int32) for t in token_lists])


def test_read_stories_tinystories_format(tmp_path, monkeypatch):
    path = tmp_path / "s.txt"
    path.write_text(
        "One day.\n<|endoftext|>\n\n<|endoftext|>\nTwo cats."
        "<|endoftext|>Three\n<|endoftext|>\nFour",
        encoding="utf-8",
    )
    # A tiny read chunk makes separators straddle chunk boundaries.
    monkeypatch.setattr(data, "_READ_CHUNK", 5)
    assert data.read_stories(str(path), 10) == ["One day.", "Two cats.", "Three", "Four"]
    assert data.read_stories(str(path), 2) == ["One day.", "Two cats."]


def test_shards_are_disjoint_and_cover_everything():
    shards = [set(data.shard_ids(103, s, 4).tolist()) for s in range(4)]
    assert sum(len(s) for s in shards) == 103
    assert set().union(*shards) == set(range(103))


def test_packing_hand_checked_example():
    """Stories of 4, 3 and 5 tokens (BOS=2 ... EOS=1) in rows of 6."""
    sh = _shard(0, [10, 11, 12], [[2, 5, 6, 1], [2, 7, 1], [2, 8, 9, 9, 1]])
    rows = list(data.batches([sh], maxlen=6, rows_per_shard=1, seed=0, epochs=1, shuffle=False))
    assert len(rows) == 2
    r1, r2 = rows
    assert r1["tokens"].tolist() == [[2, 5, 6, 1, 2, 7]]
    assert r1["segment_ids"].tolist() == [[1, 1, 1, 1, 2, 2]]
    assert r1["positions"].tolist() == [[0, 1, 2, 3, 0, 1]]
    # Story 11 is cut: its EOS starts row 2 as its own piece (position 0).
    assert r2["tokens"].tolist() == [[1, 2, 8, 9, 9, 1]]
    assert r2["segment_ids"].tolist() == [[1, 2, 2, 2, 2, 2]]
    assert r2["positions"].tolist() == [[0, 0, 1, 2, 3, 4]]
    assert data.consumed_stories(r1) == [[10, 11]]
    assert data.consumed_stories(r2) == [[11, 12]]

    # Targets: token t predicts t+1 only inside its story.
    w1 = np.asarray(steps.target_weights(r1["segment_ids"]))
    assert w1.tolist() == [[1, 1, 1, 0, 1]]
    w2 = np.asarray(steps.target_weights(r2["segment_ids"]))
    assert w2.tolist() == [[0, 1, 1, 1, 1]]

    # Attention: causal and never across stories.
    m = np.asarray(steps.attention_mask(r1["segment_ids"]))[0].astype(int)
    assert m.tolist() == [
        [1, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0],
        [1, 1, 1, 0, 0, 0],
        [1, 1, 1, 1, 0, 0],
        [0, 0, 0, 0, 1, 0],
        [0, 0, 0, 0, 1, 1],
    ]


def test_padding_is_masked():
    seg = np.asarray([[1, 1, 1, 0, 0]])
    assert np.asarray(steps.target_weights(seg)).tolist() == [[1, 1, 0, 0]]
    m = np.asarray(steps.attention_mask(seg))[0]
    assert not m[:, 3:].any()  # nothing attends to padding


def test_packing_fraction_and_coverage_on_mixed_lengths():
    r = random.Random(0)
    maxlen, rows = 128, 4
    shards = []
    for s in range(2):
        ids = list(range(s, 600, 2))
        lengths = [
            r.choice([r.randint(5, 40), r.randint(40, 200), r.randint(200, 600)]) for _ in ids
        ]
        shards.append(_shard(s, ids, [np.full(n, 7) for n in lengths]))
    batches = list(
        data.batches(shards, maxlen=maxlen, rows_per_shard=rows, seed=3, epochs=1, shuffle=True)
    )
    expected = min(
        data.full_batches(s, maxlen=maxlen, rows_per_shard=rows, epochs=1) for s in shards
    )
    assert len(batches) >= expected > 0
    fraction = np.mean([data.useful_fraction(b) for b in batches])
    print(f"useful-token fraction {fraction:.4f} over {len(batches)} batches")
    assert fraction >= 0.97
    # Every story token is used at most once; only the tail is left over.
    seen = np.concatenate([b["story"].reshape(-1) for b in batches])
    counts = np.bincount(seen[seen >= 0], minlength=600)
    lengths = {i: len(t) for s in shards for i, t in zip(s.story_ids, s.tokens)}
    assert all(counts[i] <= n for i, n in lengths.items())
    # Shard rows stay in their own half of the batch.
    for b in batches:
        top, bottom = b["story"][:rows], b["story"][rows:]
        assert set(top[top >= 0] % 2) <= {0} and set(bottom[bottom >= 0] % 2) <= {1}
    # A story is either consumed whole or not reached yet; only the one cut at
    # the end of a shard's last row may be partial.
    for s in shards:
        partial = [i for i in s.story_ids if 0 < counts[i] < lengths[i]]
        assert len(partial) <= 1, partial


@pytest.mark.parametrize("name", [n for n in model_lib.MODELS if n != "tiny"])
def test_every_model_builds_with_its_checkpoint_and_tokenizer(name):
    """Shapes only (jax.eval_shape): nothing is allocated or downloaded."""
    m = model_lib.build_model(name, 0, "bfloat16", 0)
    params = model_lib.abstract_params(m, 16)
    assert "embedder" in params and "layer_0" in params
    assert model_lib.resolve_pretrained(name, "default").startswith("gs://")
    assert model_lib.load_tokenizer(name, None).VERSION in (3, 4)
    if name == "gemma3-270m":
        assert 0.26e9 < metrics.count_params(params) < 0.28e9
