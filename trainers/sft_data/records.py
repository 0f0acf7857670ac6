"""Records from data files: JSON Lines, JSON, CSV, Parquet and text, or a directory of them.

A text file holds documents separated by `<|endoftext|>` (the layout of
TinyStories' text file), each one record {"text": ...}. A directory (a
staged Hub dataset, say) is read file by file in name order, hidden files
(the staging's `.staged.json`) left out. Reading streams, and stops once
`limit` records are read, so a large file on a GCS FUSE mount is read only
as far as needed. Parquet needs pyarrow; everything else the standard library.
"""

from __future__ import annotations

import csv
import itertools
import json
from collections.abc import Iterator
from pathlib import Path

SEPARATOR = "<|endoftext|>"
SUFFIXES = (".jsonl", ".json", ".csv", ".parquet", ".txt")
_CHUNK = 1 << 20


class RecordsError(Exception):
    """A data path that can't be read as records (exit 78)."""


def documents(path: str | Path) -> Iterator[str]:
    """The non-empty documents of a text file, streamed."""
    pending = ""
    with open(path, encoding="utf-8") as f:
        while chunk := f.read(_CHUNK):
            pending += chunk
            *parts, pending = pending.split(SEPARATOR)
            yield from (s.strip() for s in parts if s.strip())
    if pending.strip():
        yield pending.strip()


def _json(path: Path) -> Iterator[dict]:
    with open(path, encoding="utf-8") as f:
        head = f.read(1 << 12).lstrip()
        f.seek(0)
        if path.suffix == ".json" and head.startswith("["):
            yield from json.load(f)  # one JSON array of records
            return
        for number, line in enumerate(f, start=1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as err:
                    raise RecordsError(f"{path}: line {number} is not JSON ({err})") from None


def _csv(path: Path) -> Iterator[dict]:
    with open(path, encoding="utf-8", newline="") as f:
        yield from csv.DictReader(f)


def _parquet(path: Path) -> Iterator[dict]:
    import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top

    for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):
        yield from batch.to_pylist()


def _text(path: Path) -> Iterator[dict]:
    return ({"text": document} for document in documents(path))


_READERS = {".jsonl": _json, ".json": _json, ".csv": _csv, ".parquet": _parquet, ".txt": _text}


def data_files(path: str | Path) -> list[Path]:
    """The data files of `path`: itself, or a directory's, in name order."""
    path = Path(path)
    if path.is_file():
        if path.suffix.lower() not in _READERS:
            raise RecordsError(f"{path}: unsupported file type {path.suffix!r}; use one of {', '.join(SUFFIXES)}")
        return [path]
    if not path.is_dir():
        raise RecordsError(f"{path}: no such file or directory")
    found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in _READERS
                   and not any(part.startswith(".") for part in p.relative_to(path).parts))
    if not found:
        raise RecordsError(f"{path}: a directory with no data file ({', '.join(SUFFIXES)})")
    return found


def iter_records(path: str | Path) -> Iterator[dict]:
    for file in data_files(path):
        yield from _READERS[file.suffix.lower()](file)


def read_records(path: str | Path, limit: int | None = None) -> list[dict]:
    """The first `limit` records (all with None)."""
    return list(itertools.islice(iter_records(path), limit))
