"""A run's `mix`: several datasets in one run, each with its own format and columns, mixed by weight.

    mix:
      - {data: tickets, weight: 3, format: conversational}
      - {data: chats/sharegpt.jsonl, weight: 1, format: sharegpt, columns: {conversations: turns}}

Each source names a path below the stack's datasets/<stack>/ (as a run's `data` does: its first segment a
dataset of the stack), a weight (relative) and the data settings of that dataset (`format`, `columns`,
`promptTemplate`, `systemPrompt`); the run's `loss` applies to all. The rules are the trainers' own
(trainers/sft_data/mixture.py, standard library only); the manifest passes the mix as the trainers'
`--data_mix` flag, its paths where the pod mounts datasets/<stack>/. A run with `mix` has no `data` and no
data settings of its own but `loss`.
"""

from __future__ import annotations

import posixpath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictFloat
from pydantic.alias_generators import to_camel

from stack.problems import Problem
from trainers.sft_data import mixture

# mixture.py's keys (the trainers' flag names) -> the stack file's
_KEYS = {"format": "format", "columns": "columns", "prompt_template": "promptTemplate",
         "system_prompt": "systemPrompt", "loss_on": "loss", "path": "data", "weight": "weight"}
# Run keys a mix replaces: each source has its own.
REPLACED = (("data", "data"), ("format", "format"), ("columns", "columns"), ("prompt_template", "promptTemplate"),
            ("system_prompt", "systemPrompt"))
DATA_ALLOWED = "a path below the bucket's datasets/<stack>/, e.g. 'TinyStories-train.txt' or 'sql/train.jsonl'"


class MixSource(BaseModel):
    """One dataset of a run's mix."""

    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True)

    data: str = Field(description="file or directory below the bucket's datasets/<stack>/ (its dataset first)")
    weight: StrictFloat = Field(description="its share of the mix, relative to the others' (> 0)")
    format: str | None = Field(default=None, description="text | conversational | sharegpt | prompt-completion")
    columns: dict[str, str] = Field(default_factory=dict, description="standard column -> the file's column")
    prompt_template: str | None = Field(default=None, description="prompt-completion: the prompt from {column}s")
    system_prompt: str | None = Field(default=None, description="a system turn before every chat")

    def flag_entry(self, path: str) -> dict:
        """The source as --data_mix holds it (mixture.KEYS), read at `path` in the pod."""
        return {"path": path, "weight": self.weight, "format": self.format, "columns": dict(self.columns),
                "prompt_template": self.prompt_template, "system_prompt": self.system_prompt}


def data_path_problems(data: str | None, where: str, key: str = "data") -> list[Problem]:
    """A path below the stack's datasets/<stack>/ prefix: relative, not blank, not climbing out."""
    if data is None:
        return []
    if not data.strip():
        return [Problem(key, data, f"{where} is blank", DATA_ALLOWED)]
    if data.startswith("/") or "://" in data:
        return [Problem(key, data, f"{where} is absolute; it is read below the bucket's datasets/<stack>/",
                        DATA_ALLOWED)]
    if posixpath.normpath(data).split("/")[0] == "..":
        return [Problem(key, data, f"{where} climbs out of datasets/<stack>/ with '..'", DATA_ALLOWED)]
    return []


def mix_problems(run: Any, where: str) -> list[Problem]:
    """Every problem of the run's `mix`, keys as `mix[i].<key>`."""
    if not run.mix:
        return []
    if run.trainer is None:
        return [Problem("mix", f"{len(run.mix)} sources", f"{where}: a mix is read by the trainers, and this run "
                        "has none (its own container reads its own arguments)", "no mix on a run without trainer")]
    problems = [Problem(key, getattr(run, attribute), f"{where} is set beside `mix`, whose sources each carry "
                        "their own", f"`{key}` on each source of `mix`")
                for attribute, key in REPLACED if getattr(run, attribute) not in (None, {})]
    if len(run.mix) < 2:
        problems.append(Problem("mix", f"{len(run.mix)} source", f"{where} mixes nothing",
                                "two or more sources; one dataset is the run's `data`"))
    loss = "completion" if run.loss is None else run.loss
    for i, source in enumerate(run.mix):
        problems += data_path_problems(source.data, where, f"mix[{i}].data")
        entry = {k: v for k, v in source.flag_entry(source.data).items() if v not in (None, {})}
        problems += [Problem(f"mix[{i}].{_KEYS.get(p.setting, p.setting)}", p.value, f"{where} {p.why}", p.allowed)
                     for p in mixture.source_problems(entry, loss) if p.setting != "loss_on"]
    return problems


def run_datas(run: Any) -> list[str]:
    """Every path below datasets/<stack>/ a run reads: its `data`, or each source of its `mix`."""
    return [run.data] if run.data else [s.data for s in run.mix]


def mix_flag(run: Any, paths: list[str], data_dir: str) -> list[str]:
    """The `--data_mix` flag of the run's mix, each source read at data_dir/<its path>."""
    if not run.mix:
        return []
    entries = [s.flag_entry(f"{data_dir}/{path}") for s, path in zip(run.mix, paths, strict=True)]
    return ["--data_mix", mixture.flag_value(entries)]

