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
from trainers.gemma_jax import packing
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
    """Stories of 4, 3, 10 and 3 tokens (BOS=2 ... EOS=1) in rows of 6."""
    stories = [[2, 5, 6, 1], [2, 7, 1], [2, 8, 9, 10, 11, 12, 13, 14, 15, 1], [2, 16, 1]]
    sh = _shard(0, [10, 11, 12, 13], stories)
    rows = list(data.batches([sh], maxlen=6, rows_per_shard=1, seed=0, epochs=1, shuffle=False))
    # Story 12 is longer than a row: its first 6 tokens fill a row (closed at
    # once), the rest goes on after a BOS of its own. Story 13 best-fits the
    # row with exactly 3 free slots; the rows still open at the end are
    # repacked by first fit decreasing: the 5-slot piece, then the 4-slot one.
    assert [r["tokens"].tolist()[0] for r in rows] == [
        [2, 8, 9, 10, 11, 12],
        [2, 7, 1, 2, 16, 1],
        [2, 13, 14, 15, 1, 0],
        [2, 5, 6, 1, 0, 0],
    ]
    assert [r["segment_ids"].tolist()[0] for r in rows] == [
        [1, 1, 1, 1, 1, 1],
        [1, 1, 1, 2, 2, 2],
        [1, 1, 1, 1, 1, 0],
        [1, 1, 1, 1, 0, 0],
    ]
    assert [r["positions"].tolist()[0] for r in rows] == [
        [0, 1, 2, 3, 4, 5],
        [0, 1, 2, 0, 1, 2],
        [0, 1, 2, 3, 4, 0],
        [0, 1, 2, 3, 0, 0],
    ]
    assert [r["continued"].tolist()[0] for r in rows][2] == [1, 1, 1, 1, 1, 0]
    assert [data.consumed_stories(r) for r in rows] == [[[12]], [[11, 13]], [[12]], [[10]]]
    assert data.full_batches(sh, maxlen=6, rows_per_shard=1, epochs=1) == 4

    # Targets: token t predicts t+1 only inside its piece.
    r2 = rows[1]
    w2 = np.asarray(steps.target_weights(r2["segment_ids"]))
    assert w2.tolist() == [[1, 1, 0, 1, 1]]
    w3 = np.asarray(steps.target_weights(rows[3]["segment_ids"]))
    assert w3.tolist() == [[1, 1, 1, 0, 0]]

    # Attention: causal and never across stories.
    m = np.asarray(steps.attention_mask(r2["segment_ids"]))[0].astype(int)
    assert m.tolist() == [
        [1, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0],
        [1, 1, 1, 0, 0, 0],
        [0, 0, 0, 1, 0, 0],
        [0, 0, 0, 1, 1, 0],
        [0, 0, 0, 1, 1, 1],
    ]


def test_tail_of_a_long_story_fills_a_small_gap_hand_checked():
    """Rows of 64; stories of 40, 100 and 50 tokens. The 100-token story's
    first 64 tokens fill a row; its tail (BOS + 36) is cut again: BOS + 23
    tokens fill the 24-slot gap story 0 left (too small for most stories),
    BOS + the last 13 open a row that story 2 (50) then fills exactly. The
    stories that fit are whole."""
    rows = packing.plan_rows([0, 1, 2], [40, 100, 50], 64)
    P = packing.Piece
    assert rows == [
        [P(1, 0, 64, False)],
        [P(0, 0, 40, False), P(1, 64, 87, True)],
        [P(1, 87, 100, True), P(2, 0, 50, False)],
    ]
    assert all(sum(p.length for p in r) == 64 for r in rows)


def test_padding_is_masked():
    seg = np.asarray([[1, 1, 1, 0, 0]])
    assert np.asarray(steps.target_weights(seg)).tolist() == [[1, 1, 0, 0]]
    m = np.asarray(steps.attention_mask(seg))[0]
    assert not m[:, 3:].any()  # nothing attends to padding


def _mixed_shards(r, maxlen):
    shards = []
    for s in range(2):
        ids = list(range(s, 600, 2))
        lengths = [
            r.choice([r.randint(5, 40), r.randint(40, 200), r.randint(200, 600)]) for _ in ids
        ]
        # [BOS, story-unique tokens..., EOS]: every token says where it came from.
        tokens = [np.concatenate([[2], 1000 * i + np.arange(n - 2) + 4, [1]]) for i, n in zip(ids, lengths)]
        shards.append(_shard(s, ids, tokens))
    return shards


def test_packing_keeps_stories_whole_and_every_piece_starts_with_bos():
    r = random.Random(0)
    maxlen, rows = 128, 4
    shards = _mixed_shards(r, maxlen)
    kw = {"maxlen": maxlen, "rows_per_shard": rows, "seed": 3, "epochs": 1, "shuffle": True}
    batches = list(data.batches(shards, **kw))
    assert len(batches) == min(data.full_batches(s, **kw) for s in shards) > 0
    fraction = np.mean([data.useful_fraction(b) for b in batches])
    print(f"useful-token fraction {fraction:.4f} over {len(batches)} batches")
    assert fraction >= 0.97
    lengths = {i: len(t) for s in shards for i, t in zip(s.story_ids, s.tokens)}
    pieces = {}  # story -> its pieces (token arrays, BOS included)
    for b in batches:
        for row_tokens, row_seg, row_story in zip(b["tokens"], b["segment_ids"], b["story"]):
            for seg in set(row_seg[row_seg > 0].tolist()):
                piece = row_tokens[row_seg == seg]
                (story,) = set(row_story[row_seg == seg].tolist())
                assert piece[0] == 2, "a piece without its BOS"
                pieces.setdefault(story, []).append(piece)
    for story, ps in pieces.items():
        if lengths[story] <= maxlen:
            assert len(ps) == 1 and len(ps[0]) == lengths[story], "a story that fits was split"
        else:
            assert all(len(p) <= maxlen for p in ps)
    # No token twice, and the pieces of a story are consecutive parts of it.
    seen = np.concatenate([b["tokens"][b["tokens"] >= 4] for b in batches])
    assert len(seen) == len(set(seen.tolist()))
    # Shard rows stay in their own half of the batch.
    for b in batches:
        top, bottom = b["story"][:rows], b["story"][rows:]
        assert set(top[top >= 0] % 2) <= {0} and set(bottom[bottom >= 0] % 2) <= {1}


def test_every_story_is_planned_once_per_epoch_and_epochs_differ():
    shard = _mixed_shards(random.Random(1), 128)[0]
    plan = data.shard_rows(shard, maxlen=128, seed=5, epochs=2, shuffle=True)
    tokens_per_story = {}
    for row in plan:
        for p in row:
            tokens_per_story[p.story] = tokens_per_story.get(p.story, 0) + p.end - p.start
    assert tokens_per_story == {i: 2 * len(t) for i, t in enumerate(shard.tokens)}
    big_seed = data.shard_rows(shard, maxlen=128, seed=2**62, epochs=1, shuffle=True)
    assert big_seed != plan[: len(big_seed)]


@pytest.mark.parametrize("name", [n for n in model_lib.MODELS if not n.startswith("tiny")])
def test_every_model_builds_with_its_checkpoint_and_tokenizer(name):
    """Shapes only (jax.eval_shape): nothing is allocated or downloaded."""
    m = model_lib.build_model(name, 0, "bfloat16", 0)
    params = model_lib.abstract_params(m, 16)
    assert "embedder" in params and "layer_0" in params
    assert model_lib.resolve_pretrained(name, "default").startswith("gs://")
    assert model_lib.load_tokenizer(name, None).VERSION in (3, 4)
    if name == "gemma3-270m":
        assert 0.26e9 < metrics.count_params(params) < 0.28e9


def test_one_tokenize_builds_its_tokenizer_once_whatever_threads_ask(tokenizer_file):
    """grain workers call one _Tokenize's map from several threads: the first
    tokenizer must be built once (kauldron's ImmutableDict registers itself as
    a pytree on its first instance, unguarded; two at once crash the run)."""
    import threading
    import time

    built = []

    def factory():
        built.append(threading.get_ident())
        time.sleep(0.2)  # a slow first build: every thread arrives meanwhile
        return model_lib.load_tokenizer("tiny", tokenizer_file)

    tokenize_one = data._Tokenize(factory)  # pylint: disable=protected-access
    start = threading.Barrier(8)
    out = []

    def worker():
        start.wait()
        out.append(tokenize_one.map("Once upon a time."))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 1 and len(out) == 8
    assert all((o == out[0]).all() for o in out)
