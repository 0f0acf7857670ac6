"""Whole-story packing: which story pieces go into which row.

A story that fits in a row (BOS + text + EOS <= maxlen tokens) is never
split. A longer one is cut into pieces of at most maxlen tokens: the first
is its first maxlen tokens (it starts with the story's own BOS), every
following piece is a BOS followed by the next maxlen - 1 tokens, so every
row segment starts with <bos>, as every sequence the model sees at
generation time does.

Pieces are placed by best fit over a window of open rows: each piece goes to
the open row with the least free space that still holds it (a new row if
none does); a full row is closed at once, and when more than `open_rows` are
open the fullest one is closed. Gaps too small for most stories are filled
with fragments of the continuation pieces of over-long stories (those are
split anyway; a story that fits is never cut to fill a gap). Rows come out
in the order they are closed; the rows still open at the end are repacked,
their pieces whole, by first fit decreasing.
The plan is a pure function of the story lengths and their order, so a data
position is just a row index (exact resume), and the number of rows is known
before training.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

# numpy is imported where arrays are made: the plan itself (plan_rows) is plain Python, which `make
# check-data` runs in the platform's environment to measure how full the rows are.

OPEN_ROWS = 1024
# Gaps under SMALL_GAP slots are mostly too small for a whole story; the
# tail of a story longer than a row (already cut from its start) is cut
# again to fill them exactly, in fragments of at least MIN_FRAGMENT slots.
SMALL_GAP = 48
MIN_FRAGMENT = 16


@dataclasses.dataclass(frozen=True)
class Piece:
    """tokens[start:end] of story `story` (index into its shard), preceded by
    an extra BOS when `bos` (a continuation piece)."""

    story: int
    start: int
    end: int
    bos: bool

    @property
    def length(self) -> int:
        return self.end - self.start + int(self.bos)


def story_pieces(story: int, length: int, maxlen: int) -> list[Piece]:
    """The pieces of one story of `length` tokens (its BOS and EOS included)."""
    if length <= maxlen:
        return [Piece(story, 0, length, False)]
    pieces = [Piece(story, 0, maxlen, False)]
    for start in range(maxlen, length, maxlen - 1):
        pieces.append(Piece(story, start, min(start + maxlen - 1, length), True))
    return pieces


class _OpenRows:
    """Open rows by free space (best fit), closed rows in closing order."""

    def __init__(self, maxlen: int, open_rows: int):
        self.maxlen, self.limit = maxlen, open_rows
        self.rows: list[list[Piece]] = []
        self.free: list[tuple[int, int]] = []  # sorted (free slots, open row id)
        self.open: dict[int, list[Piece]] = {}
        self._ids = itertools.count()

    def _close(self, entry) -> None:
        self.free.remove(entry)
        self.rows.append(self.open.pop(entry[1]))

    def put(self, piece: Piece, entry=None) -> None:
        """Into `entry`'s row, else the best-fitting open row, else a new one."""
        if entry is None:
            i = bisect.bisect_left(self.free, (piece.length, -1))
            entry = self.free[i] if i < len(self.free) else None
        if entry is None:
            room, row = self.maxlen, next(self._ids)
            self.open[row] = []
        else:
            self.free.remove(entry)
            room, row = entry
        self.open[row].append(piece)
        entry = (room - piece.length, row)
        bisect.insort(self.free, entry)
        if entry[0] == 0:
            self._close(entry)
        elif len(self.free) > self.limit:
            self._close(self.free[0])

    def small_gap(self, below: int):
        """The smallest gap of at least MIN_FRAGMENT slots and under `below`."""
        i = bisect.bisect_left(self.free, (MIN_FRAGMENT, -1))
        return self.free[i] if i < len(self.free) and self.free[i][0] < below else None

    def finish(self) -> list[list[Piece]]:
        """The closed rows, then the pieces of the rows still open repacked
        whole by first fit decreasing (fewer, fuller last rows)."""
        left = sorted((p for row in self.open.values() for p in row), key=lambda p: -p.length)
        bins: list[list] = []
        for piece in left:
            target = next((b for b in bins if b[0] >= piece.length), None)
            if target is None:
                target = [self.maxlen, []]
                bins.append(target)
            target[0] -= piece.length
            target[1].append(piece)
        return self.rows + [b[1] for b in bins]


def _put_tail(rows: _OpenRows, piece: Piece) -> None:
    """A continuation piece (the tail of a story longer than a row): while a
    gap too small for most stories is open, fill it exactly with the next
    fragment of the tail (each a BOS + the following tokens); the rest goes
    by best fit."""
    start = piece.start
    while True:
        remaining = Piece(piece.story, start, piece.end, True)
        gap = rows.small_gap(below=min(remaining.length, SMALL_GAP))
        if gap is None:
            rows.put(remaining)
            return
        take = gap[0] - 1  # slots minus the fragment's BOS
        rows.put(Piece(piece.story, start, start + take, True), entry=gap)
        start += take


def plan_rows(order, lengths, maxlen: int, open_rows: int = OPEN_ROWS) -> list[list[Piece]]:
    """Rows of pieces for the stories `order` (indices into `lengths`)."""
    rows = _OpenRows(maxlen, open_rows)
    for story in order:
        for piece in story_pieces(int(story), int(lengths[story]), maxlen):
            if piece.bos:
                _put_tail(rows, piece)
            else:
                rows.put(piece)
    return rows.finish()


def epoch_order(num_stories: int, seed: int, shard: int, epoch: int, shuffle: bool) -> np.ndarray:
    """Story order of one shard in one epoch: a permutation seeded by
    (seed, shard, epoch), any seed in [0, 2**63)."""
    import numpy as np  # pylint: disable=g-import-not-at-top

    if not shuffle:
        return np.arange(num_stories)
    rng = np.random.default_rng([seed, shard, epoch])
    return rng.permutation(num_stories)


def row_arrays(row: list[Piece], tokens, story_ids, maxlen: int, masks=None) -> dict[str, np.ndarray]:
    """One packed row: tokens, segment ids (1, 2, ... per piece, 0 = padding),
    positions (from 0 in every piece), story id per slot (-1 = padding) and
    `continued` (1 on the slots of a piece that is not its story's start);
    with `masks` (per story, 1 on the tokens the loss is taken on), also
    `loss_mask` (a continuation piece's added BOS is never a target)."""
    import numpy as np  # pylint: disable=g-import-not-at-top

    out = {
        "tokens": np.zeros(maxlen, np.int32),
        "segment_ids": np.zeros(maxlen, np.int32),
        "positions": np.zeros(maxlen, np.int32),
        "story": np.full(maxlen, -1, np.int32),
        "continued": np.zeros(maxlen, np.int32),
    }
    if masks is not None:
        out["loss_mask"] = np.zeros(maxlen, np.int32)
    at = 0
    for segment, p in enumerate(row, start=1):
        body = tokens[p.story][p.start : p.end]
        # Every story starts with its BOS; a continuation piece reuses it.
        piece = np.concatenate([tokens[p.story][:1], body]) if p.bos else body
        span = slice(at, at + len(piece))
        out["tokens"][span] = piece
        out["segment_ids"][span] = segment
        out["positions"][span] = np.arange(len(piece))
        out["story"][span] = story_ids[p.story]
        out["continued"][span] = int(p.start > 0)
        if masks is not None:
            body_mask = masks[p.story][p.start : p.end]
            out["loss_mask"][span] = np.concatenate([[0], body_mask]) if p.bos else body_mask
        at += len(piece)
    return out
