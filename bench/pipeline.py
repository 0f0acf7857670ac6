"""Data pipeline throughput on the real Gemma 3 tokenizer: the trainer's
pipeline vs the GKE tutorial's per-item loader, side by side in one run.

    .venv-jax/bin/python -m bench.pipeline [--out bench/results/pipeline.json]

On the same generated TinyStories-like stories and the same tokenizer (the
262,144-piece Gemma 3 vocabulary, bench/real_tokenizer.py):

- tutorial: a grain DataLoader over a data source whose __getitem__
  tokenizes one story, truncates it to maxlen and pads it (the tutorial's
  TextDataset), batched; every epoch tokenizes every story again;
- trainer: `data.make_shards` (each story tokenized once, BOS + text +
  EOS) then `data.batches` (whole-story packing), in-process (workers 0,
  as the tutorial's loader).

Reported per layout and epoch: real (non-padding) tokens delivered per
second of wall time, batches, and the ratio trainer / tutorial. Epoch 1
includes the trainer's one-off tokenization; epoch 2 is the steady state.
Timings vary with the machine; nothing asserts them.
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import random
import time

import grain.python as pygrain
import numpy as np

from bench import real_tokenizer
from trainers.gemma_jax import data
from trainers.gemma_jax import model as model_lib
from bench import report as report_file

NAMES = ["Lily", "Tom", "Mia", "Ben", "Sara", "Max", "Anna", "Leo"]
THINGS = ["ball", "kite", "dog", "cat", "tree", "cake", "boat", "hat", "flower", "box"]
PLACES = ["park", "garden", "house", "forest", "beach", "school"]
FEELINGS = ["happy", "sad", "scared", "excited", "tired", "proud"]
SENTENCES = [
    "{n} went to the {p} with a {t}.",
    "The {t} was very big and {f}.",
    "{n} felt {f} when the {t} fell down.",
    "One day, {n} saw a little {t} near the {p}.",
    '"Can I play with your {t}?" asked {n}.',
    "They laughed and played in the {p} all day.",
    "Mom said, \"Be careful with the {t}, {n}!\"",
]


def make_stories(count: int, seed: int) -> list[str]:
    """TinyStories-like text; the number of sentences is log-normal, so
    most stories are short and some run past a 256-token row."""
    r = random.Random(seed)
    rng = np.random.default_rng(seed)
    out = []
    for n_sent in np.clip(rng.lognormal(np.log(14), 0.5, size=count), 2, 120).astype(int):
        name = r.choice(NAMES)
        words = ["Once upon a time, there was a child named " + name + "."]
        for _ in range(n_sent):
            words.append(
                r.choice(SENTENCES).format(n=name, t=r.choice(THINGS), p=r.choice(PLACES), f=r.choice(FEELINGS))
            )
        out.append(" ".join(words))
    return out


class TutorialDataset:
    """The tutorial's TextDataset: tokenize, truncate, pad, per item."""

    def __init__(self, stories, maxlen, tokenizer):
        self.stories, self.maxlen, self.tokenizer = stories, maxlen, tokenizer

    def __len__(self):
        return len(self.stories)

    def __getitem__(self, idx):
        encoding = self.tokenizer.encode(self.stories[idx])[: self.maxlen]
        return np.asarray(encoding + [0] * (self.maxlen - len(encoding)), np.int32)


def tutorial_epochs(stories, tokenizer, maxlen: int, batch: int, epochs: int) -> list[dict]:
    source = TutorialDataset(stories, maxlen, tokenizer)
    sampler = pygrain.IndexSampler(
        len(source), shuffle=False, seed=42, shard_options=pygrain.NoSharding(), num_epochs=1
    )
    out = []
    for _ in range(epochs):
        loader = pygrain.DataLoader(
            data_source=source, sampler=sampler, operations=[pygrain.Batch(batch, drop_remainder=True)]
        )
        t0, real, batches = time.perf_counter(), 0, 0
        for b in loader:
            real += int(np.count_nonzero(b))
            batches += 1
        out.append({"seconds": time.perf_counter() - t0, "real_tokens": real, "batches": batches})
    return out


def trainer_epochs(stories, tokenizer_path, maxlen: int, batch: int, epochs: int) -> list[dict]:
    factory = functools.partial(model_lib.load_tokenizer, "gemma3-270m", tokenizer_path)
    t0 = time.perf_counter()
    shards = data.make_shards(stories, 0, range(1), 1, factory, workers=0)
    tokenize_s = time.perf_counter() - t0
    it = iter(data.batches(shards, maxlen=maxlen, rows_per_shard=batch, seed=0, epochs=epochs, shuffle=True))
    per_epoch = data.full_batches(shards[0], maxlen=maxlen, rows_per_shard=batch, epochs=1)
    out = []
    for epoch in range(epochs):
        t0, real = time.perf_counter(), 0
        for _ in range(per_epoch):
            real += int(np.count_nonzero(next(it)["segment_ids"]))
        seconds = time.perf_counter() - t0 + (tokenize_s if epoch == 0 else 0.0)
        out.append({"seconds": seconds, "real_tokens": real, "batches": per_epoch})
    out[0]["tokenize_seconds"] = tokenize_s
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="bench/results/pipeline.json")
    p.add_argument("--stories", type=int, default=3000)
    p.add_argument("--maxlen", type=int, default=256)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--tokenizer_dir", default=os.path.expanduser("~/.cache/gke-finetune/tokenizer"))
    args = p.parse_args(argv)
    tok_path = real_tokenizer.path(args.tokenizer_dir)
    tokenizer = model_lib.load_tokenizer("gemma3-270m", tok_path)
    stories = make_stories(args.stories, 0)
    lengths = [len(tokenizer.encode(s)) + 2 for s in stories[:500]]
    runs = {
        "tutorial": tutorial_epochs(stories, tokenizer, args.maxlen, args.batch, args.epochs),
        "trainer": trainer_epochs(stories, tok_path, args.maxlen, args.batch, args.epochs),
    }
    for r in runs.values():
        for e in r:
            e["real_tokens_per_s"] = e["real_tokens"] / e["seconds"]
    ratios = [t["real_tokens_per_s"] / u["real_tokens_per_s"] for t, u in zip(runs["trainer"], runs["tutorial"])]
    report = {
        "machine": {"cpu_count": os.cpu_count(), "python": platform.python_version()},
        "settings": {k: v for k, v in vars(args).items() if k not in ("out", "tokenizer_dir")},
        "tokenizer": f"Gemma 3, {tokenizer.vocab_size} pieces (GGUF vocabulary)",
        "story_tokens_first_500": {"mean": float(np.mean(lengths)), "p90": float(np.percentile(lengths, 90))},
        "runs": runs,
        "ratio_trainer_over_tutorial_per_epoch": ratios,
    }
    print(
        f"{args.stories} stories (tokens mean {np.mean(lengths):.0f}), maxlen {args.maxlen}, "
        f"batch {args.batch}, {tokenizer.vocab_size}-piece tokenizer, {os.cpu_count()} CPUs"
    )
    print(f"{'epoch':>5} | {'tutorial real tok/s':>19} | {'trainer real tok/s':>18} | {'ratio':>5}")
    for e, (u, t, ratio) in enumerate(zip(runs["tutorial"], runs["trainer"], ratios), start=1):
        print(f"{e:>5} | {u['real_tokens_per_s']:>19.0f} | {t['real_tokens_per_s']:>18.0f} | {ratio:>5.2f}")
    report_file.write(report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
