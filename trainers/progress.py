"""The run's progress record: `progress.json` next to the checkpoints, rewritten at each log step.

Both trainers write it through this one module (the TPU trainer from process 0, the GPU trainer from
world process zero through its Trainer callback, trainers/trl_gpu/trainer.py), whole each time: to a
temporary file in the same directory, then renamed over `progress.json` (os.replace, atomic on POSIX:
a reader sees the previous record or the new one, never part of one). On GKE the checkpoint directory
is the run's Cloud Storage FUSE mount, so the record is the object `checkpoints/<stack>/<run>/progress.json`
of the bucket, which `make status` reads. Standard library only; the reader (tools/status/model.py)
validates it.

Format, schema 1 (times are UTC ISO 8601, seconds are wall-clock):
  schema            1
  trainer           "gemma-jax" | "trl-gpu"
  run               the run's name where the environment gives it (GKE_FINETUNE_RUN), else null
  step, total_steps the last step trained, and the run's last step
  tokens_per_s      real (unpadded) tokens per second over the last logged steps, or null
  loss, eval_loss   the last training loss, the last held-out loss (null until measured)
  eval_step         the step eval_loss was measured at, or null
  checkpoint_step   the newest checkpoint known to be written whole (a restart resumes from it), or null;
                    an async write is confirmed when the next save starts or the run ends, so this
                    may trail the last save by one interval, never lead it
  started_at        the run's first start (kept across restarts)
  attempt_started_at  this process's start
  updated_at        this record's write
  starts            how many times the trainer has started on this checkpoint directory
  train_seconds     time spent in training steps that still count: the time of steps a restart
                    redid (trained after the checkpoint it resumed from) is taken back out
  restore_seconds   time from each start to its first trained step (setup, restore, compilation)
  redone_steps      steps trained twice because a restart resumed from an older checkpoint
"""

from __future__ import annotations

import datetime
import json
import os
import time

SCHEMA = 1
FILE = "progress.json"
RUN_ENV = "GKE_FINETUNE_RUN"


def iso(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(timespec="seconds")


def read(directory: str) -> dict | None:
    """The record in `directory`, or None when there is none or it is not a schema-1 record."""
    try:
        with open(os.path.join(directory, FILE), encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("schema") == SCHEMA else None


class Progress:
    """The record of one process's attempt at the run; `enabled` False on every process but the owner."""

    def __init__(self, directory: str, trainer: str, total_steps: int, started: float,
                 enabled: bool = True, clock=time.time):
        self.directory, self.enabled, self.clock = directory, enabled, clock
        self.started = started
        self.first_step_seen = False
        previous = read(directory) if enabled else None
        self.previous = previous
        self.record = {
            "schema": SCHEMA, "trainer": trainer, "run": os.environ.get(RUN_ENV) or None,
            "step": 0, "total_steps": total_steps, "tokens_per_s": None, "loss": None,
            "eval_loss": None, "eval_step": None, "checkpoint_step": None,
            "started_at": (previous or {}).get("started_at") or iso(started),
            "attempt_started_at": iso(started), "updated_at": iso(started),
            "starts": int((previous or {}).get("starts", 0)) + 1,
            "train_seconds": float((previous or {}).get("train_seconds", 0.0)),
            "restore_seconds": float((previous or {}).get("restore_seconds", 0.0)),
            "redone_steps": int((previous or {}).get("redone_steps", 0)),
        }
        for key in ("eval_loss", "eval_step", "loss"):
            self.record[key] = (previous or {}).get(key)

    def resumed(self, step: int) -> None:
        """This attempt starts after `step` (0: from scratch); steps the previous attempt trained
        beyond it are redone, and their time no longer counts as training."""
        r, prev = self.record, self.previous or {}
        r["step"] = step
        r["checkpoint_step"] = step or None
        done = int(prev.get("step", 0))
        if done > step:
            per_step = float(prev.get("train_seconds", 0.0)) / done
            r["train_seconds"] = max(0.0, r["train_seconds"] - (done - step) * per_step)
            r["redone_steps"] += done - step

    def first_step(self, step: int, loss: float | None = None) -> None:
        """The attempt's first step is trained: the time since its start was spent getting there."""
        if not self.first_step_seen:
            self.first_step_seen = True
            self.record["restore_seconds"] += self.clock() - self.started
        self.record["step"] = step
        if loss is not None:
            self.record["loss"] = float(loss)
        self.write()

    def trained(self, step: int, seconds: float, loss: float | None = None,
                tokens_per_s: float | None = None) -> None:
        """Steps up to `step` trained, `seconds` of training since the last call."""
        r = self.record
        r["step"], r["train_seconds"] = step, r["train_seconds"] + max(0.0, seconds)
        if loss is not None:
            r["loss"] = float(loss)
        if tokens_per_s is not None:
            r["tokens_per_s"] = float(tokens_per_s)
        self.write()

    def evaluated(self, step: int, loss: float) -> None:
        self.record["eval_loss"], self.record["eval_step"] = float(loss), step
        self.write()

    def checkpointed(self, step: int) -> None:
        self.record["checkpoint_step"] = step
        self.write()

    def write(self) -> None:
        if not self.enabled:
            return
        self.record["updated_at"] = iso(self.clock())
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, FILE)
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.record, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
