"""How full a run's sequences are: the fraction of the tokens its trainer computes on that are real, not
padding, from the examples' token counts.

- The JAX trainer packs whole examples into rows of --maxlen tokens by its own plan
  (trainers/gemma_jax/packing.py `plan_rows`, run here on the same lengths, in file order: its epochs
  shuffle that order, which changes the figure little); an example longer than a row is split into pieces,
  each after a BOS of its own.
- The GPU trainer drops an example longer than --max_length (trainers/trl_gpu/data.py `tokenize_split`);
  with `--packing true` TRL packs the rest into rows of --max_length by best fit decreasing (trl/data_utils.py
  `_pack_bfd`: longest first, each into the open row with the least room that holds it, else a new one);
  without it (the shipped configs) TRL's collator pads each batch of --per_device_train_batch_size examples
  to its longest (trl/trainer/sft_trainer.py `DataCollatorForLanguageModeling`, through trl/trainer/utils.py
  `pad`: the largest shape of the batch), the batches drawn here in a seeded random order of their own (an
  estimate of the padding: not the Trainer's sampler's order).
"""

from __future__ import annotations

import bisect
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Fill:
    efficiency: float  # real tokens / token slots computed on
    sequences: int  # rows (packed) or padded examples
    how: str


def jax_rows(lengths: Sequence[int], maxlen: int) -> Fill:
    from trainers.gemma_jax.packing import plan_rows  # pylint: disable=import-outside-toplevel

    rows = plan_rows(range(len(lengths)), lengths, maxlen)
    real = sum(piece.length for row in rows for piece in row)
    return Fill(real / (len(rows) * maxlen) if rows else 0.0, len(rows),
                f"packed by the JAX trainer's plan into {len(rows)} row(s) of {maxlen} tokens")


def best_fit_decreasing(lengths: Sequence[int], max_length: int) -> Fill:
    """TRL's bfd packing of the examples that fit (the others are dropped before it)."""
    kept = sorted((n for n in lengths if 0 < n <= max_length), reverse=True)
    rooms: list[int] = []  # the distinct free spaces of the open rows, sorted
    open_rows: Counter = Counter()  # free space -> rows with it
    rows = 0
    for n in kept:
        i = bisect.bisect_left(rooms, n)
        if i == len(rooms):
            rows, room = rows + 1, max_length
        else:
            room = rooms[i]
            open_rows[room] -= 1
            if not open_rows[room]:
                del rooms[i], open_rows[room]
        left = room - n
        if left:
            if not open_rows[left]:
                bisect.insort(rooms, left)
            open_rows[left] += 1
    return Fill(sum(kept) / (rows * max_length) if rows else 0.0, rows,
                f"packed by TRL's best fit decreasing (--packing true) into {rows} row(s) of {max_length} tokens")


def padded_batches(lengths: Sequence[int], max_length: int | None, batch: int, seed: int = 42) -> Fill:
    """Batches of `batch` examples that fit, each padded to its longest, in a seeded random order."""
    kept = [n for n in lengths if max_length is None or n <= max_length]
    random.Random(seed).shuffle(kept)
    slots = sum(len(kept[i:i + batch]) * max(kept[i:i + batch]) for i in range(0, len(kept), batch))
    return Fill(sum(kept) / slots if slots else 0.0, len(kept),
                f"not packed (TRL's --packing is off): each batch of {batch} padded to its longest")


def fill(split, lengths: Sequence[int]) -> Fill | None:
    """The run's fill; None without a sequence length."""
    if not split.max_length:
        return None if split.gpu and split.packs else padded_batches(lengths, None, split.device_batch)
    if not split.gpu:
        return jax_rows(lengths, split.max_length)
    if split.packs:
        return best_fit_decreasing(lengths, split.max_length)
    return padded_batches(lengths, split.max_length, split.device_batch)
