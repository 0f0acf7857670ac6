"""Synthetic stories and the two row layouts the packing benchmark compares.

Packed rows come from the trainer's own pipeline (`data.batches`). Padded
rows follow the GKE tutorial: one story per row, cut at `maxlen`, the rest
filled with pad id 0. They carry segment ids (1 on real tokens, 0 on
padding) and positions, so both layouts run through the same train step and
its loss mask counts exactly the real next-token targets of each.
"""

from __future__ import annotations

import grain
import numpy as np

from trainers.gemma_jax import data
from trainers.gemma_jax import steps

PAD, EOS, BOS = 0, 1, 2
FIRST_WORD_ID = 4  # ids 0-3 are pad/eos/bos/unk, as in Gemma's vocabulary

# Token lengths (BOS + text + EOS) are log-normal: TinyStories stories are
# mostly short with a long tail of longer ones. Median 175 and sigma 0.5 give
# a mean near 200 tokens with about a fifth of the stories over 256.
LENGTH_MEDIAN = 175.0
LENGTH_SIGMA = 0.5
LENGTH_MIN, LENGTH_MAX = 16, 2048


def story_lengths(count: int, seed: int) -> np.ndarray:
    """`count` token lengths drawn from the TinyStories-like distribution."""
    rng = np.random.default_rng(seed)
    raw = rng.lognormal(np.log(LENGTH_MEDIAN), LENGTH_SIGMA, size=count)
    return np.clip(np.rint(raw), LENGTH_MIN, LENGTH_MAX).astype(np.int64)


def length_summary(lengths: np.ndarray) -> dict[str, float]:
    return {
        "mean": float(np.mean(lengths)),
        "p50": float(np.percentile(lengths, 50)),
        "p90": float(np.percentile(lengths, 90)),
        "p99": float(np.percentile(lengths, 99)),
        "max": int(np.max(lengths)),
    }


def make_shard(lengths: np.ndarray, vocab_size: int, seed: int) -> data.Shard:
    """One data shard of random stories [BOS, words..., EOS] of the given
    lengths; the token values only matter to the model, not to the layout."""
    rng = np.random.default_rng(seed)
    tokens = []
    for n in lengths:
        words = rng.integers(FIRST_WORD_ID, vocab_size, size=int(n) - 2, dtype=np.int32)
        tokens.append(np.concatenate([[BOS], words, [EOS]]).astype(np.int32))
    return data.Shard(0, np.arange(len(lengths)), tokens)


class _PadRow(grain.transforms.Map):
    """(story id, tokens) -> one row of `maxlen` slots, as the tutorial builds it."""

    def __init__(self, maxlen: int):
        self._maxlen = maxlen

    def map(self, item) -> dict[str, np.ndarray]:
        story_id, tokens = item
        kept = np.asarray(tokens[: self._maxlen], np.int32)  # the tail is dropped
        n, pad = len(kept), self._maxlen - len(kept)
        real = np.concatenate([np.ones(n, np.int32), np.zeros(pad, np.int32)])
        return {
            "tokens": np.concatenate([kept, np.full(pad, PAD, np.int32)]),
            "segment_ids": real,
            "positions": np.concatenate([np.arange(n, dtype=np.int32), np.zeros(pad, np.int32)]),
            "story": np.where(real > 0, np.int32(story_id), np.int32(-1)),
            "continued": np.zeros(self._maxlen, np.int32),  # every row starts a story
        }


def padded_batches(shard: data.Shard, *, maxlen: int, rows: int) -> grain.IterDataset:
    """Batches of `rows` padded rows with the keys of `data.batches`."""
    ds = grain.MapDataset.source(list(zip(shard.story_ids, shard.tokens)))
    ds = ds.map(_PadRow(maxlen))
    return ds.to_iter_dataset(grain.ReadOptions(num_threads=0)).batch(rows, drop_remainder=True)


def packed_batches(shard: data.Shard, *, maxlen: int, rows: int) -> grain.IterDataset:
    """The trainer's pipeline on one shard, in file order."""
    return data.batches(
        [shard], maxlen=maxlen, rows_per_shard=rows, seed=0, epochs=1, shuffle=False
    )


def target_count(batch: dict[str, np.ndarray]) -> int:
    """Real next-token targets of a batch, by the train step's own loss mask."""
    return int(np.asarray(steps.target_weights(batch["segment_ids"])).sum())


def context_complete_count(batch: dict[str, np.ndarray]) -> int:
    """Targets whose whole preceding story is in their segment: those of the
    pieces that start their story (`continued` is 0)."""
    weights = np.asarray(steps.target_weights(batch["segment_ids"]))
    return int((weights * (batch["continued"][:, 1:] == 0)).sum())


def target_fraction(batches) -> dict[str, float]:
    """Real next-token targets / token slots (rows x maxlen) over `batches`,
    and the share of those targets that have their whole story before them."""
    targets = slots = real = complete = 0
    for b in batches:
        targets += target_count(b)
        complete += context_complete_count(b)
        slots += b["segment_ids"].size
        real += int(np.count_nonzero(b["segment_ids"]))
    return {
        "targets": targets,
        "slots": slots,
        "real_tokens": real,
        "fraction": targets / slots if slots else 0.0,
        "useful_token_fraction": real / slots if slots else 0.0,
        "context_complete": complete / targets if targets else 0.0,
    }
