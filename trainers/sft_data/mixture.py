"""Several datasets in one run, each with its own format and columns, mixed by weight. Standard library only.

A run's `mix` (the platform's run key) reaches both trainers as one flag, `--data_mix`, whose value is a
JSON list of sources:

    [{"path": "/data/tickets/train.jsonl", "weight": 3, "format": "conversational"},
     {"path": "/data/chats", "weight": 1, "format": "sharegpt", "columns": "conversations=turns"}]

Each source holds `path` and `weight` (a positive number; the weights are relative) and the data settings
of formats.Spec (`format`, `columns`, `prompt_template`, `system_prompt`); the loss setting is the run's.
How the trainers mix them: the JAX trainer with grain's `MapDataset.mix` (deterministic: element i of the
mix is always the same record, so a resumed run's data position holds; it ends where the first source
runs out: grain/_src/python/dataset/dataset.py, `MapDataset.mix`), the GPU trainer with datasets'
`interleave_datasets(probabilities=weights, seed=--seed, stopping_strategy="first_exhausted")` (the same
stopping rule: no record is repeated; datasets/combine.py).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass

from trainers.sft_data import formats

# The keys of one source (the data settings as the trainers' flags name them).
SETTING_KEYS = ("format", "columns", "prompt_template", "system_prompt")
KEYS = ("path", "weight", *SETTING_KEYS)
STOPPING = "first_exhausted"  # datasets' name for grain's rule: the mix ends where the first source runs out


@dataclass(frozen=True)
class Source:
    """One dataset of a mix: where it is, its weight and its data settings."""

    path: str
    weight: float
    spec: formats.Spec


def weight_problem(value) -> str | None:
    """Why a weight is refused, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return "is not a positive number"
    return None


def source_problems(entry: Mapping, loss_on: str) -> list[formats.Setting]:
    """Every problem of one source's keys (formats.Setting, `setting` naming the key)."""
    problems = [formats.Setting(k, entry[k], "is not a key of a mix source", ", ".join(KEYS))
                for k in entry if k not in KEYS]
    if not isinstance(entry.get("path"), str) or not entry.get("path"):
        problems.append(formats.Setting("path", entry.get("path"), "is missing", "the source's file or folder"))
    why = weight_problem(entry.get("weight"))
    if why:
        problems.append(formats.Setting("weight", entry.get("weight"), why, "a number above 0 (weights are relative)"))
    columns = entry.get("columns") or {}
    try:
        mapping = formats.parse_columns(columns) if isinstance(columns, str) else dict(columns)
    except ValueError as err:
        return problems + [formats.Setting("columns", columns, str(err), "<standard name>=<column>, ...")]
    return problems + formats.settings_problems(entry.get("format") or "text", mapping,
                                                entry.get("prompt_template") or None,
                                                entry.get("system_prompt") or None, loss_on)


def parse(text: str, loss_on: str) -> tuple[Source, ...]:
    """The sources of a `--data_mix` value; FormatError naming the source, the key, the value and what is
    allowed."""
    try:
        entries = json.loads(text)
    except json.JSONDecodeError as err:
        raise formats.FormatError(f"--data_mix is not JSON ({err})") from None
    if not isinstance(entries, list) or len(entries) < 2 or not all(isinstance(e, Mapping) for e in entries):
        raise formats.FormatError("--data_mix is not a list of at least two sources {path, weight, format, ...}")
    problems = [f"source {i} ({e.get('path')}): {p.setting}={p.value!r} {p.why} (allowed: {p.allowed})"
                for i, e in enumerate(entries) for p in source_problems(e, loss_on)]
    if problems:
        raise formats.FormatError("--data_mix: " + "; ".join(problems))
    return tuple(Source(e["path"], float(e["weight"]), formats.Spec.of(
        e.get("format") or "text", e.get("columns") or "", e.get("prompt_template"), e.get("system_prompt"),
        loss_on)) for e in entries)


def flag_value(sources: list[Mapping]) -> str:
    """The `--data_mix` value of sources given as dicts of KEYS (unset settings left out)."""
    return json.dumps([{k: s[k] for k in KEYS if s.get(k) not in (None, "", {})} for s in sources],
                      separators=(",", ":"))


def probabilities(sources: tuple[Source, ...]) -> list[float]:
    """The weights as probabilities (datasets' interleave_datasets wants them to sum to 1)."""
    total = sum(s.weight for s in sources)
    return [s.weight / total for s in sources]


def trains_some_tokens(sources: tuple[Source, ...], loss_on: str) -> bool:
    """Whether any source's records carry a loss mask (then every row of the mix does)."""
    return any(formats.trains_some_tokens(s.spec.format, loss_on) for s in sources)
