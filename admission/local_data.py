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

import dataclasses
import itertools
import posixpath
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from core.trainers import TRAINERS
from stack.config import StackConfig
from stack.problems import Problem
from trainers.sft_data import chat, formats, parts, records


@dataclass(frozen=True)
class LocalData:
    """The files one run reads from a `path:` dataset, and its data settings."""

    dataset: str
    files: tuple[tuple[str, Path], ...]  # (name below datasets/<stack>/, file here)
    spec: formats.Spec
    key: str = "data"  # the run's key that names it: data, or mix[i].data
    data: str = ""  # its value
    weight: float | None = None  # its weight in the run's mix
    template: str | None = None  # the shipped chat template its trainer renders chats with, where known


# Flags that make a run's chat template other than its model's shipped one.
_TEMPLATE_FLAGS = ("--chat_template", "--init_from_hf", "--model", "--model_id")


def known_template(run) -> str | None:
    """The shipped template (trainers/sft_data/templates) a run's trainer renders chats with, where the stack
    alone says which: the JAX trainer's model family's (gemma3-270m by default), and a Gemma 3 model's on the
    GPU trainer, whose checkpoints ship Google's Gemma 3 template (TRL's gemma3.jinja, "as shipped by
    google/gemma-3-*": trl/chat_templates/README.md), which like the shipped one prints each message's
    `content` only. None where `weights`, a flag or a Gemma 4 checkpoint's own template decides."""
    if run.weights or any(a.split("=", 1)[0] in _TEMPLATE_FLAGS for a in run.args):
        return None
    flags = TRAINERS[run.trainer].model_flags if run.trainer in TRAINERS else None
    if flags and flags.family_template:
        return chat.family_template(run.model or flags.default_model)
    return "gemma3" if (run.model or "").startswith("gemma3") else None


@dataclass(frozen=True)
class BadRow:
    """One row that its trainer would refuse (row 0: the file itself)."""

    file: str
    row: int
    message: str
    unread: bool = False  # not readable on this machine (pyarrow missing), not bad

    def __str__(self) -> str:
        return f"{self.file}:{self.row}: {self.message}" if self.row else f"{self.file}: {self.message}"


def run_spec(run, source=None) -> formats.Spec | None:
    """The data settings of the run (or of a source of its mix) as its trainer takes them; None where the
    stack refuses them anyway."""
    given = source or run
    try:
        return formats.Spec.of(given.format or "text", dict(given.columns or {}), given.prompt_template,
                               given.system_prompt, run.loss or "completion")
    except formats.FormatError:
        return None


def _local(config: StackConfig, data: str, spec: formats.Spec | None, root: Path,
           template: str | None = None) -> LocalData | None:
    name, _, rest = posixpath.normpath(data).partition("/")
    dataset = next((d for d in config.datasets if d.name == name and d.path), None)
    if dataset is None or spec is None or not (root / dataset.path).exists():
        return None
    files = [(f"{name}/{below}", path) for below, path in dataset.local_files(root)
             if path.suffix.lower() in records.SUFFIXES
             and (not rest or rest in (".", below) or below.startswith(rest.rstrip("/") + "/"))]
    return LocalData(name, tuple(files), spec, data=data, template=template)


def local_sources(config: StackConfig, run, root: Path | None = None) -> list[tuple[str, str, LocalData | None]]:
    """(key, value, what it reads from a `path:` dataset, or None for data from elsewhere) of each dataset
    `run` reads: its `data`, or each source of its `mix`. A `path:` is relative to the project's directory,
    `root` (default: the current directory, where the CLI runs the program)."""
    if run.trainer is None:
        return []
    root, template = root or Path.cwd(), known_template(run)
    if run.data:
        return [("data", run.data, _local(config, run.data, run_spec(run), root, template))]
    out = []
    for i, source in enumerate(run.mix):
        found = _local(config, source.data, run_spec(run, source), root, template)
        if found is not None:
            found = dataclasses.replace(found, key=f"mix[{i}].data", weight=source.weight)
        out.append((f"mix[{i}].data", source.data, found))
    return out


def bad_rows(data: LocalData, rows_per_file: int | None = None,
             each: Callable[[str, int, formats.Record], None] | None = None) -> Iterator[BadRow | tuple[str, int]]:
    """Each row its trainer would refuse, file by file (the first `rows_per_file` of each; all with None),
    and after each file (its name, the rows read from it), for counts and progress; `each` is
    given every good row as its trainer reads it."""
    render = chat.ChatTemplate.named(data.template, "<bos>", "<eos>").render if data.template else None
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
                refusal = render and parts.tools_refusal(data.spec, render, got, row,
                                                         f"chat template {data.template}")
                if refusal:
                    yield BadRow(name, row, refusal)
                    continue
                if each is not None:
                    each(name, row, got)
        except ImportError as err:
            yield BadRow(name, 0, f"not read on this machine ({err})", unread=True)
        except (records.RecordsError, UnicodeDecodeError, ValueError, OSError) as err:
            yield BadRow(name, 0, f"can't be read as records after row {read}: {err}")
        yield name, read


def first_rows_problems(config: StackConfig, root: Path | None = None) -> list[Problem]:
    """The first rows (formats.FIRST_ROWS) of each file every run reads from a `path:` dataset, against the
    run's format: columns, roles, types. Cheap enough for every plan."""
    problems = []
    for i, run in enumerate(config.runs):
        for _, _, data in local_sources(config, run, root):
            if data is not None:
                problems += _first_rows(config, f"runs[{i}].{data.key}", run.name, data)
    return problems


def _first_rows(config: StackConfig, key: str, run: str, data: LocalData) -> list[Problem]:
    if not data.files:
        return [Problem(key, data.data, f"on run {run!r} names no data file of dataset {data.dataset!r}",
                        f"a file or folder of it ({', '.join(records.SUFFIXES)})")]
    found = [b for b in bad_rows(data, formats.FIRST_ROWS) if isinstance(b, BadRow) and not b.unread]
    problems = [Problem(key, data.data, f"on run {run!r} (format {data.spec.format}): {bad}", "rows of the "
                        f"run's format; `make check-data STACK={config.stack} RUN={run}` lists every bad row")
                for bad in found[:5]]
    if len(found) > 5:
        problems.append(Problem(key, data.data, f"on run {run!r}: {len(found) - 5} more bad rows among the "
                                f"first {formats.FIRST_ROWS} of each file"))
    return problems
