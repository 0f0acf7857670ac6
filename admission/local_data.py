"""A run's own data on this machine (a dataset's `path:`), read as its trainer will read it.

A run's `data` is a path below the stack's datasets/<stack>/ prefix; its first segment names the
dataset, and a `path:` dataset is uploaded there file by file (components/uploads.py), so the run
reads the files of that dataset below the rest of its `data`. Both trainers read records with
trainers/sft_data/records.py and check each against the run's format with
trainers/sft_data/formats.py; this module runs the same code here, before anything is declared:
`make plan` and `pulumi up` check the first rows of every file (`first_rows_problems`), and
`make check-data` every row (tools/data).
"""

from __future__ import annotations

import itertools
import posixpath
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from stack.config import StackConfig
from stack.problems import Problem
from trainers.sft_data import formats, records


@dataclass(frozen=True)
class LocalData:
    """The files one run reads from a `path:` dataset, and its data settings."""

    dataset: str
    files: tuple[tuple[str, Path], ...]  # (name below datasets/<stack>/, file here)
    spec: formats.Spec


@dataclass(frozen=True)
class BadRow:
    """One row that its trainer would refuse (row 0: the file itself)."""

    file: str
    row: int
    message: str
    unread: bool = False  # not readable on this machine (pyarrow missing), not bad

    def __str__(self) -> str:
        return f"{self.file}:{self.row}: {self.message}" if self.row else f"{self.file}: {self.message}"


def run_spec(run) -> formats.Spec | None:
    """The run's data settings as its trainer takes them; None where the stack refuses them anyway."""
    try:
        return formats.Spec.of(run.format or "text", dict(run.columns or {}), run.prompt_template,
                               run.system_prompt, run.loss or "completion")
    except formats.FormatError:
        return None


def local_data(config: StackConfig, run, root: Path | None = None) -> LocalData | None:
    """What `run` reads from a `path:` dataset of the stack; None for data from elsewhere. A `path:` is
    relative to the project's directory, `root` (default: the current directory, where the CLI runs the
    program)."""
    if run.trainer is None or not run.data:
        return None
    name, _, rest = posixpath.normpath(run.data).partition("/")
    dataset = next((d for d in config.datasets if d.name == name and d.path), None)
    spec = run_spec(run)
    root = root or Path.cwd()
    if dataset is None or spec is None or not (root / dataset.path).exists():
        return None
    files = [(f"{name}/{below}", path) for below, path in dataset.local_files(root)
             if path.suffix.lower() in records.SUFFIXES
             and (not rest or rest in (".", below) or below.startswith(rest.rstrip("/") + "/"))]
    return LocalData(name, tuple(files), spec)


def bad_rows(data: LocalData, rows_per_file: int | None = None,
             each: Callable[[str, int, formats.Record], None] | None = None) -> Iterator[BadRow | tuple[str, int]]:
    """Each row its trainer would refuse, file by file (the first `rows_per_file` of each; all with None),
    and after each file (its name, the rows read from it), for counts and progress; `each` is
    given every good row as its trainer reads it."""
    for name, path in data.files:
        read = 0
        try:
            for row, record in enumerate(itertools.islice(records.iter_records(path), rows_per_file), start=1):
                read = row
                try:
                    got = formats.read_record(data.spec, record, row)
                except formats.FormatError as err:
                    yield BadRow(name, row, str(err).removeprefix(f"row {row}: "))
                    continue
                if each is not None:
                    each(name, row, got)
        except ImportError as err:
            yield BadRow(name, 0, f"not read on this machine ({err})", unread=True)
        except (records.RecordsError, UnicodeDecodeError, ValueError, OSError) as err:
            yield BadRow(name, 0, f"can't be read as records after row {read}: {err}")
        yield name, read


def first_rows_problems(config: StackConfig) -> list[Problem]:
    """The first rows (formats.FIRST_ROWS) of each file every run reads from a `path:` dataset, against the
    run's format: columns, roles, types. Cheap enough for every plan."""
    problems = []
    for i, run in enumerate(config.runs):
        data = local_data(config, run)
        if data is None:
            continue
        if not data.files:
            problems.append(Problem(f"runs[{i}].data", run.data, f"on run {run.name!r} names no data file of "
                                    f"dataset {data.dataset!r}", f"a file or folder of it ({', '.join(records.SUFFIXES)})"))
            continue
        found = [b for b in bad_rows(data, formats.FIRST_ROWS) if isinstance(b, BadRow) and not b.unread]
        for bad in found[:5]:
            problems.append(Problem(f"runs[{i}].data", run.data, f"on run {run.name!r} (format "
                                    f"{data.spec.format}): {bad}", "rows of the run's format; `make check-data "
                                    f"STACK={config.stack} RUN={run.name}` lists every bad row"))
        if len(found) > 5:
            problems.append(Problem(f"runs[{i}].data", run.data, f"on run {run.name!r}: {len(found) - 5} more bad "
                                    f"rows among the first {formats.FIRST_ROWS} of each file"))
    return problems
