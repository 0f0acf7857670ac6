"""The packing benchmark's padded rows and useful-token fraction, on a
hand-checked example (so bench/packing.py measures what it says)."""

from __future__ import annotations

import numpy as np

import gemma_jax_helpers  # noqa: F401  (puts the repo on sys.path)
from bench import rows
from trainers.gemma_jax import data


def _shard(token_lists):
    return data.Shard(
        0, np.arange(len(token_lists)), [np.asarray(t, np.int32) for t in token_lists]
    )


# Stories of 4, 3 and 7 tokens (BOS=2 ... EOS=1); the last is longer than maxlen 6.
STORIES = [[2, 5, 6, 1], [2, 7, 1], [2, 8, 9, 9, 9, 9, 1]]


def test_padded_rows_hand_checked():
    (batch,) = list(rows.padded_batches(_shard(STORIES), maxlen=6, rows=3))
    assert batch["tokens"].tolist() == [
        [2, 5, 6, 1, 0, 0],
        [2, 7, 1, 0, 0, 0],
        [2, 8, 9, 9, 9, 9],  # cut at maxlen: the EOS is lost, as in the tutorial
    ]
    assert batch["segment_ids"].tolist() == [
        [1, 1, 1, 1, 0, 0],
        [1, 1, 1, 0, 0, 0],
        [1, 1, 1, 1, 1, 1],
    ]
    assert batch["positions"].tolist() == [
        [0, 1, 2, 3, 0, 0],
        [0, 1, 2, 0, 0, 0],
        [0, 1, 2, 3, 4, 5],
    ]
    assert batch["story"].tolist() == [
        [0, 0, 0, 0, -1, -1],
        [1, 1, 1, -1, -1, -1],
        [2, 2, 2, 2, 2, 2],
    ]
    # An incomplete last batch is dropped, like the trainer's packed batches.
    assert len(list(rows.padded_batches(_shard(STORIES), maxlen=6, rows=2))) == 1


def test_useful_fraction_hand_checked():
    # Padded: 3 + 2 + 5 next-token targets in 3 x 6 slots.
    padded = rows.target_fraction(rows.padded_batches(_shard(STORIES), maxlen=6, rows=3))
    assert (padded["targets"], padded["slots"], padded["real_tokens"]) == (10, 18, 13)
    assert padded["fraction"] == 10 / 18
    # Packed, first two rows: [2 8 9 9 9 9] (story 2's first piece, full, so
    # closed first) and [2 5 6 1 | 2 1] (story 0, then the rest of story 2
    # after its own BOS); a target never crosses a piece: 5 and 3 + 1 targets.
    first_two = list(rows.packed_batches(_shard(STORIES), maxlen=6, rows=1))[:2]
    packed = rows.target_fraction(first_two)
    assert (packed["targets"], packed["slots"], packed["real_tokens"]) == (9, 12, 12)
    assert packed["fraction"] == 9 / 12


def test_story_lengths_are_tinystories_like():
    lengths = rows.story_lengths(4000, seed=0)
    assert 180 < lengths.mean() < 220
    assert 0.1 < np.mean(lengths > 256) < 0.35  # the long tail padding cuts
    shard = rows.make_shard(lengths[:5], vocab_size=256, seed=0)
    assert [len(t) for t in shard.tokens] == lengths[:5].tolist()
    assert all(t[0] == rows.BOS and t[-1] == rows.EOS for t in shard.tokens)


def test_context_complete_fraction_hand_checked():
    # Rows of 6: story 2 (7 tokens) is split; its second piece [2 1] has one
    # target, which lacks the story before it: 9 targets, 8 context-complete.
    first_two = list(rows.packed_batches(_shard(STORIES), maxlen=6, rows=1))[:2]
    packed = rows.target_fraction(first_two)
    assert packed["context_complete"] == 8 / 9
    padded = rows.target_fraction(rows.padded_batches(_shard(STORIES), maxlen=6, rows=3))
    assert padded["context_complete"] == 1.0
