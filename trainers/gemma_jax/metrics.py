"""Metrics to stdout (for `kubectl logs -f`) and TensorBoard event files.

MFU = model FLOPs per second / (devices x --peak_flops_per_device). Model
FLOPs per token count the matmuls that run (flops_per_token): M, the weights
a token is multiplied with (every matrix of the tree, except embedding tables
that are only looked up: the input embedding counts once, as the tied output
projection, and Gemma 4's per-layer embeddings not at all; a mixture-of-
experts layer counts top_k of its experts), and A, the attention score and
value matmuls, 4 x heads x key size x maxlen per layer (Gemma 4's global
layers have their own key size; gemma computes sliding-window layers as
full masked squares, so they count the full square too). Training: 2M + A
forward, 2M + 2A backward through activations, 2M_trainable weight gradients.
"""

from __future__ import annotations

import json
import os
import time

import jax
import numpy as np


def count_params(tree) -> int:
    return int(sum(np.prod(x.shape) for x in jax.tree.leaves(tree)))


_LOOKUP_ONLY = ("per_layer_embeddings",)  # gemma4 Embedder: indexed, never multiplied


def matmul_weights(params, config) -> float:
    """M: weights each token is multiplied with, per forward pass."""
    experts = getattr(config, "num_experts", 0) or 0
    total = 0.0
    for path, leaf in jax.tree_util.tree_leaves_with_path(params):
        names = [str(getattr(k, "key", k)) for k in path]
        if len(leaf.shape) < 2 or any(n in _LOOKUP_ONLY for n in names):
            continue
        size = float(np.prod(leaf.shape))
        if experts and "mlp" in names and leaf.shape[0] == experts:
            size *= config.top_k_experts / experts  # only the routed experts run
        total += size
    return total


def attention_flops(config, maxlen: int) -> float:
    """A: QK^T and AV of every layer, per token, forward."""
    global_key = getattr(config, "global_key_size", None)
    total = 0
    for kind in config.attention_types:
        key = global_key if (global_key and kind.name == "GLOBAL") else config.head_dim
        total += 4 * config.num_heads * key * maxlen
    return float(total)


def flops_per_token(all_params, trainable_params, config, maxlen: int) -> float:
    """Training FLOPs per token (forward + backward + weight gradients)."""
    m, a = matmul_weights(all_params, config), attention_flops(config, maxlen)
    return 4 * m + 3 * a + 2 * matmul_weights(trainable_params, config)


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
    return f"{v:.6g}"


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
