"""Checkpoints that survive pod kills, and a SIGTERM that ends in a save.

A checkpoint directory (`checkpoint-<step>`, written by the Trainer) only
counts once every process has finished writing it: after that, the main
process adds `COMPLETE_MARKER`. A pod killed halfway through a save leaves a
directory without it, which the next start ignores and removes. The marker is
a plain file because directory renames on a GCS FUSE mount are neither atomic
nor always allowed, so "write to a temporary name, then rename" is not an
option there.

On SIGTERM during training (preemption, maintenance, `kubectl delete`) the
handler only sets a flag. At the end of the current optimizer step the processes agree on it
(one all-reduce, so every rank stops at the same step), save a checkpoint and
stop; the entry point then exits with `exit_codes.TERMINATED`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import time

import torch
import torch.distributed as dist
from transformers import TrainerCallback

log = logging.getLogger(__name__)

COMPLETE_MARKER = "checkpoint_complete.json"
_CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")


def _checkpoints(output_dir: str) -> list[tuple[int, str]]:
    """(step, path) of every checkpoint-<step> directory, newest first."""
    if not os.path.isdir(output_dir):
        return []
    found = []
    for name in os.listdir(output_dir):
        match = _CHECKPOINT_RE.match(name)
        path = os.path.join(output_dir, name)
        if match and os.path.isdir(path):
            found.append((int(match.group(1)), path))
    return sorted(found, reverse=True)


def is_complete(path: str) -> bool:
    try:
        with open(os.path.join(path, COMPLETE_MARKER)) as f:
            json.load(f)
    except (OSError, ValueError):
        return False
    return os.path.isfile(os.path.join(path, "trainer_state.json"))


def latest_complete_checkpoint(output_dir: str) -> str | None:
    for _, path in _checkpoints(output_dir):
        if is_complete(path):
            return path
    return None


def remove_incomplete_checkpoints(output_dir: str) -> list[str]:
    """Delete checkpoints newer than the latest complete one: they are left
    over from a save that was cut short, and training will write them again."""
    latest = latest_complete_checkpoint(output_dir)
    latest_step = int(_CHECKPOINT_RE.match(os.path.basename(latest)).group(1)) if latest else -1
    removed = []
    for step, path in _checkpoints(output_dir):
        if step > latest_step and not is_complete(path):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


class CompleteMarker(TrainerCallback):
    """Marks a checkpoint complete once every process has written its part."""

    def on_save(self, args, state, control, **kwargs):
        if dist.is_available() and dist.is_initialized():
            dist.barrier()
        if state.is_world_process_zero:
            path = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
            with open(os.path.join(path, COMPLETE_MARKER), "w") as f:
                json.dump({"global_step": state.global_step, "saved_at": time.time()}, f)
            log.info("checkpoint complete: %s", path)
        return control


class GracefulStop(TrainerCallback):
    """Turns SIGTERM during training into "save at the end of this step, then stop".

    The handler is only installed while the training loop runs. Outside it
    (loading, the final save) SIGTERM keeps its default effect and ends the
    process at once: there is no step to finish, and a process blocked in a
    collective would never run a Python handler anyway.
    """

    def __init__(self, signals=(signal.SIGTERM,)):
        self.signals = signals
        self.requested = False  # this process received the signal
        self.stopped = False  # training stopped because of it (on every rank)
        self._previous = {}

    def _handle(self, signum, frame):
        log.warning("received %s: saving a checkpoint at the end of this step", signal.Signals(signum).name)
        self.requested = True

    def on_train_begin(self, args, state, control, **kwargs):
        for sig in self.signals:
            self._previous[sig] = signal.signal(sig, self._handle)
        return control

    def on_train_end(self, args, state, control, **kwargs):
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        return control

    def _agreed(self) -> bool:
        if not (dist.is_available() and dist.is_initialized()):
            return self.requested
        device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
        flag = torch.tensor([1 if self.requested else 0], device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    def on_step_end(self, args, state, control, **kwargs):
        if self._agreed():
            self.stopped = True
            control.should_save = True
            control.should_evaluate = False
            control.should_training_stop = True
        return control
