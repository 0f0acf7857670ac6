"""A run's export directory, complete or not: the marker both trainers write last, and its readers.

An export is a Hugging Face model directory (config, safetensors, tokenizer and chat template; or a
LoRA adapter alone) that a trainer writes to its `--export_dir` (the run's `exports/<stack>/<run>/`
in the bucket, mounted through Cloud Storage FUSE) when training succeeds. `begin` removes the
marker of an earlier export first, so that while files are being rewritten no reader takes the
directory for complete; `finish` lists every file with its size and writes `MARKER` last. On the
FUSE mount each file becomes its object whole when it is closed (a Cloud Storage object is never
seen half-written), so a reader that finds the marker finds every file it lists
(https://github.com/GoogleCloudPlatform/gcsfuse/blob/master/docs/semantics.md, "Write semantics":
changes are uploaded on close and fsync). Readers (`make download`, `make status`, `make generate`,
the serving pods) trust the directory only when the marker is there and its files are.

Standard library only: both trainers and the platform's tools read it.
"""

from __future__ import annotations

import datetime
import json
import os

MARKER = "export_complete.json"
# What an export may be written as (a run's `export.format` and `export.dtype`).
FORMATS = ("huggingface",)
DTYPES = ("bfloat16", "float16", "float32")
SCHEMA = 1
# Written beside the model by a run's `eval:` before the marker (trainers/eval_report.py).
EVAL_FILE = "eval.json"


def begin(directory: str) -> None:
    """Make `directory` ready for a new export: the old marker goes first, then the old files."""
    os.makedirs(directory, exist_ok=True)
    marker = os.path.join(directory, MARKER)
    if os.path.exists(marker):
        os.remove(marker)


def files(directory: str) -> dict[str, int]:
    """Every file below `directory` but the marker, by its path relative to it ('/'-separated), with its size."""
    found = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            relative = os.path.relpath(path, directory).replace(os.sep, "/")
            if relative != MARKER:
                found[relative] = os.path.getsize(path)
    return dict(sorted(found.items()))


def finish(directory: str, about: dict) -> dict:
    """Write the marker, last: the export's files with their sizes, and `about` (trainer, run, format,
    merge, dtype, base model, step)."""
    record = {
        "schema": SCHEMA,
        "completed_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        **about,
        "files": files(directory),
    }
    with open(os.path.join(directory, MARKER), "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1, sort_keys=True)
    return record


class IncompleteExport(Exception):
    """The directory holds no complete export: the message says why."""


def check_marker(record: object, where: str) -> dict:
    """The marker's record, checked: a schema-1 object whose `files` maps names to sizes."""
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        raise IncompleteExport(f"{where}: {MARKER} is not a schema-{SCHEMA} export marker")
    listed = record.get("files")
    if not isinstance(listed, dict) or not all(isinstance(n, str) and isinstance(s, int) for n, s in listed.items()):
        raise IncompleteExport(f"{where}: {MARKER} has no `files` mapping of names to sizes")
    return record


def read(directory: str) -> dict:
    """The marker of a complete local export, its files present at their sizes; IncompleteExport otherwise."""
    path = os.path.join(directory, MARKER)
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    except FileNotFoundError:
        raise IncompleteExport(f"{directory}: no {MARKER}: the export is not complete (or not there)") from None
    except (OSError, ValueError) as err:
        raise IncompleteExport(f"{path}: unreadable: {err}") from None
    record = check_marker(record, directory)
    for name, size in record["files"].items():
        local = os.path.join(directory, *name.split("/"))
        if not os.path.isfile(local) or os.path.getsize(local) != size:
            raise IncompleteExport(f"{directory}: {name} is missing or not {size} bytes, as {MARKER} lists it")
    return record
