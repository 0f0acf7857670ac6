"""Pre-tokenized stories: written once by the staging Job, read by every host at start-up.

    python -m trainers.gemma_jax.token_shards --text TinyStories-train.txt --out tokens/ --model gemma3-270m

The writer tokenizes each story with the trainer's own tokenizer and
transform (data.py: BOS + text + EOS), in file order, into ArrayRecord
files (one int32 record per story; grain reads them natively, by index)
with an `index.json` of their record and token counts and of the
tokenizer. A run whose `--data_path` is such a directory takes story i's
tokens from record i instead of tokenizing, so it trains on exactly the
batches the text file gives, and start-up reads only the records of the
shards this host owns. A tokenizer that is not the run's is refused
(exit 78): the ids would mean other words.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from trainers.exit_codes import CONFIG_ERROR

INDEX = "index.json"
FORMAT = 1
STORIES_PER_FILE = 100_000
_BATCH = 2048


class TokenShardsError(Exception):
    """Token shards that this run can't use (exit 78)."""


def is_token_dir(path: str) -> bool:
    return (Path(path) / INDEX).is_file()


def tokenizer_identity(tokenizer) -> dict:
    """What makes two tokenizers the same: vocabulary size and the digest of the vocabulary."""
    size = int(tokenizer.vocab_size)
    pieces = "\n".join(tokenizer.decode([i]) for i in range(min(size, 4096)))
    return {"vocab_size": size, "vocab_sha256": hashlib.sha256(pieces.encode()).hexdigest()}


def iter_stories(path: str):
    """Every non-empty story of a TinyStories text file, streamed (data.read_stories' split)."""
    from trainers.gemma_jax import data  # the one definition of the file format

    pending = ""
    with open(path, encoding="utf-8") as f:
        while chunk := f.read(1 << 20):
            pending += chunk
            *parts, pending = pending.split(data.SEPARATOR)
            yield from (s.strip() for s in parts if s.strip())
    if pending.strip():
        yield pending.strip()


def write(text: str, out: str, model: str, tokenizer_path: str | None = None) -> dict:
    """Tokenize `text` into ArrayRecord shards under `out`; returns the index. Replaces `out` atomically."""
    from array_record.python.array_record_module import ArrayRecordWriter

    from trainers.gemma_jax import data
    from trainers.gemma_jax import model as model_lib

    tokenizer = model_lib.load_tokenizer(model, tokenizer_path)
    tokenize = data._Tokenize(lambda: tokenizer)  # the trainer's own transform
    target, partial = Path(out), Path(out + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    shards, lengths, writer, started = [], [], None, time.monotonic()
    for i, story in enumerate(iter_stories(text)):
        if i % STORIES_PER_FILE == 0:
            if writer:
                writer.close()
            name = f"stories-{len(shards):05d}.array_record"
            writer = ArrayRecordWriter(str(partial / name), "group_size:1")
            shards.append({"file": name, "first": i, "records": 0, "tokens": 0})
        ids = tokenize.map(story)
        writer.write(ids.astype(np.int32).tobytes())
        shards[-1]["records"] += 1
        shards[-1]["tokens"] += len(ids)
        lengths.append(len(ids))
        if (i + 1) % 50_000 == 0:
            print(f"[tokens] {i + 1} stories, {sum(lengths)} tokens, {time.monotonic() - started:.0f} s", flush=True)
    if writer:
        writer.close()
    index = {
        "format": FORMAT, "model": model, "tokenizer": tokenizer_identity(tokenizer),
        "source": {"file": Path(text).name, "size": Path(text).stat().st_size},
        "stories": len(lengths), "tokens": int(sum(lengths)), "shards": shards,
    }
    (partial / INDEX).write_text(json.dumps(index, indent=1))
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    return index


class TokenStories:
    """Random access to the stories of a token-shard directory, by global story id."""

    def __init__(self, path: str):
        self.path = Path(path)
        self.index = json.loads((self.path / INDEX).read_text())
        if self.index.get("format") != FORMAT:
            raise TokenShardsError(f"{path}: token shard format {self.index.get('format')!r}; this trainer reads {FORMAT}")
        self._readers: dict[str, object] = {}

    @property
    def count(self) -> int:
        return int(self.index["stories"])

    def check_tokenizer(self, tokenizer) -> None:
        if self.index["tokenizer"] != tokenizer_identity(tokenizer):
            raise TokenShardsError(
                f"--data_path={self.path}: written with {self.index['model']}'s tokenizer "
                f"({self.index['tokenizer']}), not this run's ({tokenizer_identity(tokenizer)}); "
                "stage the dataset with this run's model in `tokenize`, or read the text file"
            )

    def _reader(self, name: str):
        from array_record.python.array_record_module import ArrayRecordReader

        if name not in self._readers:
            self._readers[name] = ArrayRecordReader(str(self.path / name))
        return self._readers[name]

    def tokens(self, ids) -> list[np.ndarray]:
        """The token arrays of stories `ids` (any order): one batched read per shard file."""
        ids = np.asarray(ids, dtype=np.int64)
        firsts = np.asarray([s["first"] for s in self.index["shards"]])
        which = np.searchsorted(firsts, ids, side="right") - 1
        out: list[np.ndarray | None] = [None] * len(ids)
        for shard_index in np.unique(which):
            shard = self.index["shards"][shard_index]
            positions = np.flatnonzero(which == shard_index)
            records = self._reader(shard["file"]).read([int(i) - shard["first"] for i in ids[positions]])
            for position, record in zip(positions, records):
                out[position] = np.frombuffer(record, dtype=np.int32).copy()
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainers.gemma_jax.token_shards", allow_abbrev=False,
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--text", required=True, help="a TinyStories-format text file")
    parser.add_argument("--out", required=True, help="the token-shard directory to write")
    parser.add_argument("--model", required=True, help="the model whose tokenizer to use")
    parser.add_argument("--tokenizer", help="a local SentencePiece file instead of the model's")
    args = parser.parse_args(argv)
    if not Path(args.text).is_file():
        print(f"[tokens] --text={args.text}: no such file", file=sys.stderr)
        return CONFIG_ERROR
    index = write(args.text, args.out, args.model, args.tokenizer)
    print(f"[tokens] {index['stories']} stories, {index['tokens']} tokens in {len(index['shards'])} file(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
