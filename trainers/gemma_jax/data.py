"""Input pipeline: read, tokenize once, shard, pack, batch.

Layout of the global batch (`--batch_size` rows of `--maxlen` tokens): the
data is cut into `data_shards` disjoint shards of stories (story i goes to
shard i % data_shards), each process owns a contiguous block of shards, and
every shard contributes batch_size / data_shards rows to each step, in shard
order. The batch composition therefore depends on `data_shards` only, not on
how many hosts share the work, and the process-local rows are exactly the
rows that the process's devices hold (see sharding.global_batch).

Each story is tokenized once, up front, as BOS + text + EOS. Rows hold whole
stories (packing.py: best fit; only a story longer than a row is split, and
each of its pieces starts with BOS), with segment ids (1, 2, ... per piece,
0 = padding) and positions restarting at 0 for every piece, so attention and
targets never cross a story boundary.

Records of other formats (conversational, prompt-completion, or text in a
column of a data file; trainers/sft_data) are tokenized the same way, once,
each with its loss mask (examples.py), and packed exactly as stories are;
where a format trains only some tokens, every row carries `loss_mask` and
the loss is taken only on its targets (steps.py).
"""

from __future__ import annotations

import dataclasses
import threading

from absl import flags
import grain
import numpy as np

from trainers.gemma_jax import examples, packing
from trainers.sft_data import records

SEPARATOR = records.SEPARATOR
_READ_CHUNK = 1 << 20


def read_stories(path: str, count: int) -> list[str]:
    """The first `count` non-empty stories of a TinyStories text file.

    Streams the file, so a 2 GB file on a GCS FUSE mount is read only as far
    as needed.
    """
    stories: list[str] = []
    pending = ""
    with open(path, encoding="utf-8") as f:
        while len(stories) < count:
            chunk = f.read(_READ_CHUNK)
            pending += chunk
            parts = pending.split(SEPARATOR)
            pending = parts.pop() if chunk else ""
            stories.extend(s.strip() for s in parts if s.strip())
            if not chunk:
                if pending.strip():
                    stories.append(pending.strip())
                break
    return stories[:count]


# Held while a _Tokenize builds its tokenizer. A grain worker calls one
# _Tokenize's map from several threads; gemma's tokenizer freezes its
# custom tokens into kauldron's ImmutableDict, whose first instance
# registers the class as a JAX pytree unguarded (kauldron/utils/
# immutabledict/immutabledict_lib.py, __new__), so two first tokenizers at
# once fail with "Duplicate custom PyTreeDef type registration".
_BUILD_LOCK = threading.Lock()


class _Tokenize(grain.transforms.Map):
    """story text -> int32 [BOS, ..., EOS]; builds its tokenizer lazily (once,
    whichever thread asks first) so it can be shipped to grain worker processes."""

    def __init__(self, tokenizer_factory):
        self._factory = tokenizer_factory
        self._tokenizer = None

    def map(self, text: str) -> np.ndarray:
        if self._tokenizer is None:
            with _BUILD_LOCK:
                if self._tokenizer is None:
                    self._tokenizer = self._factory()
        tok = self._tokenizer
        ids = tok.encode(text)
        return np.asarray(
            [int(tok.special_tokens.BOS), *ids, int(tok.special_tokens.EOS)],
            dtype=np.int32,
        )


def tokenize(stories: list[str], tokenizer_factory, workers: int) -> list[np.ndarray]:
    """Tokenizes every story once, in `workers` grain processes (0 = here)."""
    if workers <= 0:
        # A plain loop: grain's MapDataset costs about as much per story as
        # the tokenization itself (bench/pipeline.py).
        tokenize_one = _Tokenize(tokenizer_factory)
        return [tokenize_one.map(s) for s in stories]
    ds = grain.MapDataset.source(stories).map(_Tokenize(tokenizer_factory))
    # grain reads absl flags when it starts workers; this program parses its
    # own flags with argparse, so absl's defaults are used.
    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()
    it = ds.to_iter_dataset().mp_prefetch(grain.MultiprocessingOptions(num_workers=workers))
    return list(it)


@dataclasses.dataclass(frozen=True)
class Shard:
    """The tokenized stories of one data shard, with their global story ids."""

    index: int
    story_ids: np.ndarray
    tokens: list[np.ndarray]
    masks: list[np.ndarray] | None = None  # per story: 1 on the tokens the loss is taken on

    @property
    def num_tokens(self) -> int:
        return int(sum(len(t) for t in self.tokens))


def shard_ids(num_stories: int, shard: int, num_shards: int) -> np.ndarray:
    return np.arange(shard, num_stories, num_shards)


def make_shards(
    stories: list[str],
    id_offset: int,
    shards: range,
    num_shards: int,
    tokenizer_factory,
    workers: int,
) -> list[Shard]:
    """Tokenizes only the shards this process owns."""
    out = []
    for s in shards:
        ids = shard_ids(len(stories), s, num_shards)
        tokens = tokenize([stories[i] for i in ids], tokenizer_factory, workers)
        out.append(Shard(s, ids + id_offset, tokens))
    return out


def tokenize_records(items: list[tuple], spec, tokenizer_factory, template_factory,
                     workers: int, names: tuple[str, ...] = ()) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(tokens, loss masks) of (row number, record) items, in `workers` grain processes (0 = here); with
    several datasets (`spec` a tuple, `names` theirs), items are (row number, record, dataset index)."""
    transform = examples.TokenizeRecord(spec, tokenizer_factory, template_factory, names)
    if workers <= 0:
        out = [transform.map(item) for item in items]
    else:
        if not flags.FLAGS.is_parsed():
            flags.FLAGS.mark_as_parsed()
        ds = grain.MapDataset.source(items).map(transform).to_iter_dataset()
        out = list(ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=workers)))
    return [o["tokens"] for o in out], [o["mask"] for o in out]


def make_record_shards(rows: list, id_offset: int, shards: range, num_shards: int, spec, tokenizer_factory,
                       template_factory, workers: int, masked: bool, names: tuple[str, ...] = ()) -> list[Shard]:
    """The shards this process owns, from records: record i of `rows` is record id_offset + i of the data.
    With several datasets (mix_records), a row is (row number in its dataset, record, dataset index)."""
    out = []
    for s in shards:
        ids = shard_ids(len(rows), s, num_shards)
        # Row numbers as in the data (1 = its first record), for errors that name a row.
        items = [rows[i] if names else (int(id_offset + i + 1), rows[i]) for i in ids]
        tokens, masks = tokenize_records(items, spec, tokenizer_factory, template_factory, workers, names)
        out.append(Shard(s, ids + id_offset, tokens, masks if masked else None))
    return out


def mix_records(sources: list[list], weights: list[float]) -> list[tuple[int, dict, int]]:
    """The records of several datasets mixed by weight, as (row number in its dataset, record, dataset
    index): grain's MapDataset.mix, deterministic (the same list on every process and every start, so a
    resumed run's data position holds), ending where the first dataset runs out
    (grain/_src/python/dataset/dataset.py, `MapDataset.mix`)."""
    parts = [grain.MapDataset.source([(row, record, i) for row, record in enumerate(rows, start=1)])
             for i, rows in enumerate(sources)]
    return list(grain.MapDataset.mix(parts, weights))


def make_token_shards(source, id_offset: int, count: int, shards: range, num_shards: int) -> list[Shard]:
    """The shards this process owns, read from pre-tokenized stories (token_shards.TokenStories):
    story i of the run is record id_offset + i, as line i of the text would be."""
    out = []
    for s in shards:
        ids = shard_ids(count, s, num_shards)
        out.append(Shard(s, ids + id_offset, source.tokens(ids + id_offset)))
    return out


class _Row(grain.transforms.Map):
    """A row plan -> the arrays of one packed row (packing.row_arrays)."""

    def __init__(self, shard: Shard, maxlen: int):
        self._shard, self._maxlen = shard, maxlen

    def map(self, row):
        return packing.row_arrays(row, self._shard.tokens, self._shard.story_ids, self._maxlen, self._shard.masks)


def shard_rows(shard: Shard, *, maxlen: int, seed: int, epochs: int, shuffle: bool):
    """The row plan of a shard over all epochs; each epoch is packed on its
    own, so no row mixes two epochs."""
    lengths = [len(t) for t in shard.tokens]
    rows = []
    for epoch in range(epochs):
        order = packing.epoch_order(len(lengths), seed, shard.index, epoch, shuffle)
        rows.extend(packing.plan_rows(order, lengths, maxlen))
    return rows


def _shard_batches(shard: Shard, rows: list, maxlen: int, rows_per_shard: int):
    ds = grain.MapDataset.source(rows).map(_Row(shard, maxlen))
    # Tokens are already in memory: reading threads would only fight the GIL.
    return ds.to_iter_dataset(grain.ReadOptions(num_threads=0)).batch(
        rows_per_shard, drop_remainder=True
    )


def _concat_shards(parts) -> dict[str, np.ndarray]:
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def batches(
    shards: list[Shard], *, maxlen: int, rows_per_shard: int, seed: int, epochs: int, shuffle: bool
) -> grain.IterDataset:
    """Process-local batches: the rows of every local shard, in shard order.

    The result is one grain IterDataset, so its iterator's get_state() /
    set_state() capture the exact data position of all local shards.
    """
    parts = [
        _shard_batches(
            s,
            shard_rows(s, maxlen=maxlen, seed=seed, epochs=epochs, shuffle=shuffle),
            maxlen,
            rows_per_shard,
        )
        for s in shards
    ]
    return grain.experimental.ZipIterDataset(parents=parts, strict=False).map(_concat_shards)


def full_batches(
    shard: Shard, *, maxlen: int, rows_per_shard: int, epochs: int, seed: int = 0, shuffle: bool = False
) -> int:
    """How many full batches `batches` yields for this shard with the same
    settings (exact: the packing plan is computed the same way)."""
    rows = shard_rows(shard, maxlen=maxlen, seed=seed, epochs=epochs, shuffle=shuffle)
    return len(rows) // rows_per_shard


def inspect_arrays(batches: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """What the train step sees of `batches`, stacked [N, rows, maxlen]: the
    target of slot t is the token at t+1, weighted 1 only inside its piece
    (steps.target_weights; the last slot of a row never has a target)."""
    tokens = np.stack([b["tokens"] for b in batches])
    seg = np.stack([b["segment_ids"] for b in batches])
    nxt, cur = seg[..., 1:], seg[..., :-1]
    weights = np.zeros(seg.shape, np.float32)
    weights[..., :-1] = (nxt == cur) & (nxt != 0)
    if "loss_mask" in batches[0]:
        weights[..., :-1] *= np.stack([b["loss_mask"] for b in batches])[..., 1:]
    targets = np.zeros_like(tokens)
    targets[..., :-1] = tokens[..., 1:]
    out = {
        "input_tokens": tokens,
        "target_tokens": targets * (weights > 0),
        "loss_weights": weights,
        "segment_ids": seg,
        "positions": np.stack([b["positions"] for b in batches]),
        "story": np.stack([b["story"] for b in batches]),
    }
    if "loss_mask" in batches[0]:
        out["loss_mask"] = np.stack([b["loss_mask"] for b in batches])
    return out


def useful_fraction(batch: dict[str, np.ndarray]) -> float:
    """Share of the slots of a batch that hold a real token."""
    return float(np.mean(batch["segment_ids"] > 0))


def consumed_stories(batch: dict[str, np.ndarray]) -> list[list[int]]:
    """Per row, the story ids in order of appearance (for the samples log)."""
    out = []
    for row in batch["story"]:
        ids = row[row >= 0]
        keep = np.concatenate([[True], ids[1:] != ids[:-1]]) if len(ids) else []
        out.append([int(i) for i in ids[keep]])
    return out
