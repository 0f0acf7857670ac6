"""A run's data settings: `format`, `columns`, `promptTemplate`, `systemPrompt`, `loss`.

The formats and their rules are the trainers' own (trainers/sft_data/formats.py, standard library
only); both trainers declare the same flags for them in their flags modules. The stack checks the
settings together, before anything is declared, and the run manifest passes the ones a run sets
as flags (`--data_format`, `--columns`, ...), which the run's `args` may not repeat. A run of one's
own container has no trainer to pass them to.
"""

from __future__ import annotations

from typing import Any

from stack.problems import Problem
from trainers.sft_data import formats

# (stack key, RunConfig attribute, trainer flag)
DATA_KEYS = (
    ("format", "format", "--data_format"),
    ("columns", "columns", "--columns"),
    ("promptTemplate", "prompt_template", "--prompt_template"),
    ("systemPrompt", "system_prompt", "--system_prompt"),
    ("loss", "loss", "--loss_on"),
)
DATA_FLAGS = {flag: key for key, _, flag in DATA_KEYS} | {"--data_mix": "mix"}  # stack/run_mix.py
# formats.Setting.setting -> stack key
_KEYS = {"format": "format", "columns": "columns", "prompt_template": "promptTemplate",
         "system_prompt": "systemPrompt", "loss_on": "loss"}


def _set(run: Any) -> list[tuple[str, str, Any]]:
    """(key, flag, value) of each data setting the run sets."""
    return [(key, flag, getattr(run, attribute)) for key, attribute, flag in DATA_KEYS
            if getattr(run, attribute) not in (None, {})]


def data_flags(run: Any) -> list[str]:
    """The trainer flags of the run's data settings, in DATA_KEYS order."""
    flags = []
    for key, flag, value in _set(run):
        flags += [flag, formats.format_columns(value) if key == "columns" else str(value)]
    return flags


def data_problems(run: Any, where: str) -> list[Problem]:
    given = _set(run)
    if not given:
        return []
    if run.trainer is None:
        return [Problem(key, value, f"{where}: a data setting of the trainers, and this run has none (its own "
                        "container reads its own arguments)", "no data settings on a run without trainer")
                for key, _, value in given]
    # Unset is the default; set, even to "", it is what the trainer gets (`--data_format ''` is no format).
    found = formats.settings_problems("text" if run.format is None else run.format, dict(run.columns),
                                      run.prompt_template, run.system_prompt,
                                      "completion" if run.loss is None else run.loss)
    return [Problem(_KEYS[p.setting], p.value, f"{where} {p.why}", p.allowed) for p in found]
