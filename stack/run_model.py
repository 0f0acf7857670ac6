"""A run's model, by name (`model:`), from the Hub at a revision or from weights in the bucket.

`model: gemma3-4b` tells the trainer the size in its own terms (core/trainers.py `ModelFlags`): the
JAX trainer its model name (its weights: gemma's checkpoint of that size), the GPU trainer the
instruction-tuned Hub checkpoint (`revision:` pins the Hub commit) and, for a Gemma 3 model, the
decoder layer class FSDP wraps. `weights:` is a Hugging Face model directory below the bucket's
datasets/<stack>/ (staged from a `gs://` prefix by a `gcs:` dataset, or uploaded by a `path:` one), which
the trainer starts from instead. The model is what the memory fit counts
(admission/accelerator_memory.py).
"""

from __future__ import annotations

import posixpath
from typing import Any

from core.models import MODELS
from stack.problems import MISSING, Problem


def model_problems(run: Any, where: str) -> list[Problem]:
    given = [(k, v) for k, v in (("model", run.model), ("revision", run.revision), ("weights", run.weights)) if v]
    if not given:
        return []
    if run.trainer is None:
        return [Problem(key, value, f"{where}: a setting of the trainers, and this run has none (its own container "
                        "names its own model)", "no model settings on a run without trainer")
                for key, value in given]
    row, problems = run.row, []
    if row.model_flags is None:
        return [Problem("model", run.model, f"{where}: trainer {run.trainer} takes no model by name", "no `model`")]
    if run.model is None:
        problems.append(Problem("model", MISSING, f"{where}: `revision` and `weights` are of a model named by `model`",
                                ", ".join(MODELS)))
    elif run.model not in MODELS:
        problems.append(Problem("model", run.model, f"{where} is not a model the trainers know", ", ".join(MODELS)))
    if run.revision and row.model_flags.revision is None:
        problems.append(Problem("revision", run.revision, f"{where}: trainer {run.trainer} reads gemma's own checkpoint "
                                "of the model, not the Hub's", "`weights` (a Hugging Face directory) instead"))
    if run.revision and run.weights:
        problems.append(Problem("revision", run.revision, f"{where}: the weights come from `weights`, not the Hub",
                                "one of revision, weights"))
    if run.weights is not None:
        normal = posixpath.normpath(run.weights)
        if not run.weights.strip() or run.weights.startswith("/") or "://" in run.weights or normal.startswith(".."):
            problems.append(Problem("weights", run.weights,
                                    f"{where} is not a path below the bucket's datasets/<stack>/",
                                    "a Hugging Face model directory below datasets/<stack>/, e.g. 'gemma3-4b-tuned' "
                                    "(stage a gs:// prefix there with a `gcs:` dataset)"))
    return problems


def model_args(run: Any, data_dir: str) -> list[str]:
    """The trainer flags of the run's model settings; `data_dir` is where the pod mounts datasets/<stack>/."""
    if run.trainer is None or run.model is None or run.row.model_flags is None:
        return []
    flags, model = run.row.model_flags, MODELS[run.model]
    if run.weights and flags.weights == flags.model:  # the directory stands for the model
        return [flags.weights, f"{data_dir}/{run.weights}"]
    args = [flags.model, model.hub_id if flags.by_hub_id else model.name]
    if run.weights:
        args += [flags.weights, f"{data_dir}/{run.weights}"]
    if run.revision:
        args += [flags.revision, run.revision]
    return args


def launcher_args(run: Any) -> tuple[str, ...]:
    """Launcher flags the run's model needs (the decoder layer class FSDP wraps)."""
    if run.trainer is None or run.model is None or run.row.model_flags is None:
        return ()
    flag = run.row.model_flags.layer_class_launch_flag
    return (flag, MODELS[run.model].decoder_layer) if flag else ()
