"""Metrics to stdout (for `kubectl logs -f`) and TensorBoard event files.

MFU = model FLOPs per second / (devices x --peak_flops_per_device). Model
FLOPs per token: 2N forward + 2N backward through activations + 2N_trainable
for weight gradients (= 6N for a full fine-tune), plus the attention score
and value matmuls, 12 x layers x heads x head_dim x maxlen (full square; the
causal half is not subtracted, the usual convention).
"""

from __future__ import annotations

import json
import os
import time

import jax
import numpy as np


def count_params(tree) -> int:
    return int(sum(np.prod(x.shape) for x in jax.tree.leaves(tree)))


def flops_per_token(total_params: int, trainable_params: int, dims: dict, maxlen: int) -> float:
    dense = 4 * total_params + 2 * trainable_params
    attention = 12 * dims["num_layers"] * dims["num_heads"] * dims["head_dim"] * maxlen
    return float(dense + attention)


class MetricsWriter:
    """Prints one line per log step and mirrors scalars to TensorBoard."""

    def __init__(self, log_dir: str, enabled: bool):
        self._enabled = enabled
        self._tb = None
        if enabled and log_dir:
            os.makedirs(log_dir, exist_ok=True)
            from tensorboardX import SummaryWriter  # pylint: disable=g-import-not-at-top

            self._tb = SummaryWriter(log_dir)

    def scalars(self, step: int, values: dict[str, float], prefix: str = "") -> None:
        if not self._enabled:
            return
        parts = " ".join(f"{k}={_fmt(v)}" for k, v in values.items())
        print(f"[{prefix or 'train'}] step {step} {parts}", flush=True)
        if self._tb is not None:
            for k, v in values.items():
                self._tb.add_scalar(f"{prefix or 'train'}/{k}", v, step)
            self._tb.flush()

    def text(self, step: int, tag: str, value: str) -> None:
        if self._enabled and self._tb is not None:
            self._tb.add_text(tag, value, step)
            self._tb.flush()

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


def _fmt(v: float) -> str:
    if isinstance(v, int) or float(v).is_integer() and abs(v) >= 1:
        return str(int(v))
    return f"{v:.4g}"


class StepTimer:
    """Wall time per step over each logging interval."""

    def __init__(self):
        self._t = time.perf_counter()
        self._steps = 0

    def tick(self) -> None:
        self._steps += 1

    def lap(self) -> tuple[float, int]:
        """(seconds per step, steps) since the last lap."""
        now = time.perf_counter()
        steps = max(self._steps, 1)
        dt = (now - self._t) / steps
        self._t, self._steps = now, 0
        return dt, steps


class SampleLog:
    """Story ids consumed at every step, one JSON line per step and process."""

    def __init__(self, log_dir: str, enabled: bool):
        self._f = None
        if enabled:
            os.makedirs(log_dir, exist_ok=True)
            path = os.path.join(log_dir, f"samples-p{jax.process_index()}.jsonl")
            self._f = open(path, "a", encoding="utf-8")

    def write(self, step: int, rows: list[list[int]]) -> None:
        if self._f is not None:
            self._f.write(json.dumps({"step": step, "rows": rows}) + "\n")
            self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
