"""`eval.json`: how a run's model does on held-out data, beside its export (a run's `eval:`).

Both trainers write the same record (standard library only; `make status` reads it):

  schema          1
  trainer, run    who wrote it (run: GKE_FINETUNE_RUN, or null)
  step            the trained step the figures are of
  held_out_loss   {"model": <loss>, "base": <loss or null>}: the mean loss on the held-out split
  metric          null, or {"name": "sql_execution_accuracy", "model": <0..1>, "base": <0..1 or null>,
                  "scored": <records it could be computed on>}
  samples         [{"prompt", "reference" (held-out records; null for a stack's own prompts), "model",
                  "base" (null without compareBase), "model_match", "base_match" (the metric's verdict
                  per record, or null)}]

`base` is the model the run started from, on the same prompts and the same held-out split.
"""

from __future__ import annotations

import json
import os

SCHEMA = 1
FILE = "eval.json"
SQL_EXECUTION = "sql_execution_accuracy"
# A run's `eval.metric`: `auto` computes the trainer's task metric where the data has what it needs
# (the text-to-SQL rows' `sql_context`), `none` none, `sql-execution` that one.
METRICS = ("auto", "none", "sql-execution")


def accuracy(verdicts: list) -> tuple[float | None, int]:
    """(share of True, count) over the verdicts that are not None; (None, 0) when there are none."""
    scored = [v for v in verdicts if v is not None]
    return (sum(bool(v) for v in scored) / len(scored), len(scored)) if scored else (None, 0)


def record(trainer: str, step: int, loss: float | None, base_loss: float | None, samples: list[dict],
           metric: str | None) -> dict:
    """The record of one evaluation; `metric` names the task metric the samples' `*_match` verdicts give."""
    body = {"schema": SCHEMA, "trainer": trainer, "run": os.environ.get("GKE_FINETUNE_RUN") or None, "step": step,
            "held_out_loss": {"model": loss, "base": base_loss}, "metric": None, "samples": samples}
    if metric:
        model, scored = accuracy([s.get("model_match") for s in samples])
        base, _ = accuracy([s.get("base_match") for s in samples])
        if scored:
            body["metric"] = {"name": metric, "model": model, "base": base, "scored": scored}
    return body


def write(directory: str, body: dict) -> str:
    path = os.path.join(directory, FILE)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(body, f, indent=1)
    return path


def summary(body: dict) -> str:
    """One line: held-out loss and the metric, the base model's beside them."""
    loss = body.get("held_out_loss") or {}
    parts = [f"held-out loss {_num(loss.get('model'))}" + (f" (base {_num(loss.get('base'))})"
                                                           if loss.get("base") is not None else "")]
    metric = body.get("metric")
    if metric:
        parts.append(f"{metric['name']} {_num(metric.get('model'), '.1%')}"
                     + (f" (base {_num(metric.get('base'), '.1%')})" if metric.get("base") is not None else "")
                     + f" on {metric.get('scored')} records")
    parts.append(f"{len(body.get('samples') or [])} samples")
    return "; ".join(parts)


def _num(value, fmt: str = ".4f") -> str:
    return "-" if not isinstance(value, (int, float)) else format(value, fmt)
