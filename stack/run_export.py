"""A run's model once trained: `export:` (where and how it is written) and `eval:` (how it is judged).

`export: {format: huggingface, merge: true, dtype: bfloat16}` makes the trainer write a Hugging Face
directory (safetensors, config, tokenizer and chat template) to `exports/<stack>/<run>/` of the
bucket when training succeeds, and a completion marker last (trainers/export_dir.py); `merge: false`
writes the LoRA adapter alone. `eval:` adds, beside the export, `eval.json`: the held-out loss,
sample generations and the task metric, each also for the base model on the same prompts. The
trainer row's `ExportFlags` (core/trainers.py) say how both reach the trainer; the manifest mounts
the export prefix at EXPORT_DIR and passes the flags.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from core.trainers import EVAL_METRICS, EXPORT_DTYPES, EXPORT_FORMATS
from stack.models import Count, StackModel
from stack.problems import Problem

MAX_EVAL_SAMPLES = 256
MAX_NEW_TOKENS = 4096


class ExportConfig(StackModel):
    """`export:` of a run: the model written when training succeeds."""

    format: str = Field(default="huggingface", description=" | ".join(EXPORT_FORMATS))
    merge: bool = Field(default=True, description="LoRA merged into the base (true), or the adapter alone (false)")
    dtype: str = Field(default="bfloat16", description=" | ".join(EXPORT_DTYPES))


class EvalConfig(StackModel):
    """`eval:` of a run with `export:`: written as eval.json beside the export."""

    samples: Count = Field(default=8, ge=0, le=MAX_EVAL_SAMPLES,
                           description="held-out records whose prompts are generated and scored")
    prompts: tuple[str, ...] = Field(default=(), description="more prompts, generated as they are")
    max_new_tokens: Count = Field(default=256, ge=1, le=MAX_NEW_TOKENS, description="generation budget per prompt")
    compare_base: bool = Field(default=True, description="the same figures for the base model, on the same prompts")
    metric: str = Field(default="auto", description=" | ".join(EVAL_METRICS))


def export_problems(run: Any, where: str) -> list[Problem]:
    """The run's `export` and `eval` against each other and its trainer."""
    export, evaluation = run.export, run.eval
    problems = []
    if export is not None:
        problems += _format_problems(export, where)
    if export is None and evaluation is not None:
        problems.append(Problem("eval", _shown(evaluation), f"{where}: eval.json is written beside the export, "
                                "and the run has no `export`", "`export: {format: huggingface}` beside `eval`"))
    if export is None:
        return problems
    if run.trainer is None:
        return problems + [Problem("export", _shown(export), f"{where}: a setting of the trainers, and this run "
                                   "has none (its own container writes what it wants below its checkpoints)",
                                   "no export on a run without trainer")]
    flags = run.row.export_flags
    if flags is None:
        return problems + [Problem("export", _shown(export), f"{where}: trainer {run.trainer} exports nothing",
                                   "no export")]
    if not export.merge and flags.merge is None:
        problems.append(Problem("export.merge", False, f"{where}: trainer {run.trainer} writes merged weights only",
                                "true"))
    if evaluation is not None:
        problems += _eval_problems(evaluation, flags.metrics, run.trainer, where)
        if flags.eval_samples is None and "samples" in evaluation.model_fields_set and evaluation.samples:
            problems.append(Problem("eval.samples", evaluation.samples, f"{where}: trainer {run.trainer} has no "
                                    "held-out prompts to generate (its held-out split is packed token rows)",
                                    "0, and the prompts to try in `eval.prompts`"))
    return problems


def _format_problems(export: ExportConfig, where: str) -> list[Problem]:
    problems = []
    if export.format not in EXPORT_FORMATS:
        problems.append(Problem("export.format", export.format, f"{where} is not an export format",
                                " | ".join(EXPORT_FORMATS)))
    if export.dtype not in EXPORT_DTYPES:
        problems.append(Problem("export.dtype", export.dtype, f"{where} is not a dtype the export writes",
                                " | ".join(EXPORT_DTYPES)))
    return problems


def _eval_problems(evaluation: EvalConfig, metrics: tuple[str, ...], trainer: str, where: str) -> list[Problem]:
    problems = []
    if evaluation.metric not in EVAL_METRICS:
        problems.append(Problem("eval.metric", evaluation.metric, f"{where} is not a metric", " | ".join(EVAL_METRICS)))
    elif evaluation.metric not in ("auto", "none") and evaluation.metric not in metrics:
        problems.append(Problem("eval.metric", evaluation.metric, f"{where}: trainer {trainer} does not compute it",
                                " | ".join(("auto", "none", *metrics))))
    problems += [Problem(f"eval.prompts[{i}]", p, f"{where} is blank", "a prompt with text")
                 for i, p in enumerate(evaluation.prompts) if not p.strip()]
    return problems


def export_args(run: Any, export_dir: str) -> list[str]:
    """The trainer flags of the run's `export` and `eval`; `export_dir` is where the pod mounts its export."""
    if run.trainer is None or run.export is None or run.row.export_flags is None:
        return []
    flags, export = run.row.export_flags, run.export
    args = [flags.directory, export_dir, flags.dtype, export.dtype]
    if flags.merge is not None:
        args += [flags.merge, str(export.merge).lower()]
    evaluation = run.eval
    if evaluation is not None:
        if flags.eval_samples is not None:
            args += [flags.eval_samples, str(evaluation.samples)]
        args += [flags.eval_max_new_tokens, str(evaluation.max_new_tokens), flags.eval_compare_base,
                 str(evaluation.compare_base).lower(), flags.eval_metric, evaluation.metric]
        if evaluation.prompts:
            args += [flags.eval_prompts, json.dumps(list(evaluation.prompts))]
    return args


def _shown(model: StackModel) -> dict:
    return model.model_dump(by_alias=True)
