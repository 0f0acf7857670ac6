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
open the fullest one is closed. Rows come out in the order they are closed.
The plan is a pure function of the story lengths and their order, so a data
position is just a row index (exact resume), and the number of rows is known
before training.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools

import numpy as np

OPEN_ROWS = 1024


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


def plan_rows(order, lengths, maxlen: int, open_rows: int = OPEN_ROWS) -> list[list[Piece]]:
    """Rows of pieces for the stories `order` (indices into `lengths`)."""
    rows: list[list[Piece]] = []
    free: list[tuple[int, int]] = []  # sorted (free slots, open row id)
    open_: dict[int, list[Piece]] = {}
    ids = itertools.count()

    def close(entry):
        free.remove(entry)
        rows.append(open_.pop(entry[1]))

    for story in order:
        for piece in story_pieces(int(story), int(lengths[story]), maxlen):
            i = bisect.bisect_left(free, (piece.length, -1))
            if i < len(free):
                room, row = free.pop(i)
            else:
                room, row = maxlen, next(ids)
                open_[row] = []
            open_[row].append(piece)
            entry = (room - piece.length, row)
            bisect.insort(free, entry)
            if entry[0] == 0:
                close(entry)
            elif len(free) > open_rows:
                close(free[0])
    rows.extend(open_[row] for _, row in sorted(free, key=lambda e: e[1]))
    return rows


def epoch_order(num_stories: int, seed: int, shard: int, epoch: int, shuffle: bool) -> np.ndarray:
    """Story order of one shard in one epoch: a permutation seeded by
    (seed, shard, epoch), any seed in [0, 2**63)."""
    if not shuffle:
        return np.arange(num_stories)
    rng = np.random.default_rng([seed, shard, epoch])
    return rng.permutation(num_stories)


def row_arrays(row: list[Piece], tokens, story_ids, maxlen: int) -> dict[str, np.ndarray]:
    """One packed row: tokens, segment ids (1, 2, ... per piece, 0 = padding),
    positions (from 0 in every piece), story id per slot (-1 = padding) and
    `continued` (1 on the slots of a piece that is not its story's start)."""
    out = {
        "tokens": np.zeros(maxlen, np.int32),
        "segment_ids": np.zeros(maxlen, np.int32),
        "positions": np.zeros(maxlen, np.int32),
        "story": np.full(maxlen, -1, np.int32),
        "continued": np.zeros(maxlen, np.int32),
    }
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
        at += len(piece)
    return out
