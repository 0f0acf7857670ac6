"""Shared helpers of the JAX trainer tests (imported by the test modules)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from trainers.gemma_jax import model_eval  # noqa: E402  (after the repository is on the path)

NAMES = ["Amy", "Tom", "Lily", "Ben", "Sue", "Max", "Mia", "Sam"]
THINGS = ["ball", "cat", "dog", "tree", "cake", "box", "kite", "boat"]
MOODS = ["red", "blue", "happy", "sad", "big", "small"]


def make_story(r: random.Random, sentences: int) -> str:
    """A templated story: its next tokens are learnable from the prefix."""
    name, thing = r.choice(NAMES), r.choice(THINGS)
    out = [f"Once upon a time, there was a girl named {name}."]
    for _ in range(sentences):
        out.append(f"{name} liked the {r.choice(THINGS)}. The {thing} was {r.choice(MOODS)}.")
    out.append(f"{name} was happy.")
    return " ".join(out)


def write_tinystories(path: str, stories: list[str]) -> None:
    """TinyStories-train.txt format: stories separated by <|endoftext|>."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n<|endoftext|>\n".join(stories) + "\n<|endoftext|>\n")


def cpu_env(devices: int) -> dict[str, str]:
    env = dict(os.environ)
    env["JAX_PLATFORMS"] = "cpu"
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    env["PYTHONPATH"] = REPO
    env["PYTHONUNBUFFERED"] = "1"
    for k in (
        "JAX_COORDINATOR_ADDRESS",
        "JAX_NUM_PROCESSES",
        "JAX_PROCESS_ID",
        "TPU_WORKER_HOSTNAMES",
        "MEGASCALE_COORDINATOR_ADDRESS",
    ):
        env.pop(k, None)
    return env


def base_args(stories_file, tokenizer_file, ckpt, logs, **overrides):
    """The local CPU command of the README, with test-sized numbers."""
    args = {
        "model": "tiny",
        "tokenizer": tokenizer_file,
        "pretrained": "none",
        "data_path": stories_file,
        "datacount": 1200,
        "eval_stories": 64,
        "maxlen": 64,
        "batch_size": 8,
        "steps": 24,
        "learning_rate": 3e-3,
        "param_dtype": "float32",
        "checkpoint_dir": str(ckpt),
        "log_dir": str(logs),
        "save_every": 4,
        "keep_checkpoints": 3,
        "eval_every": 0,
        "log_every": 1,
        "data_workers": 0,
        "sample_tokens": 0,
    }
    args.update(overrides)
    out = []
    for k, v in args.items():
        if v is True:
            out.append(f"--{k}")
        elif v is not None and v is not False:
            out += [f"--{k}", str(v)]
    return out


def train_cmd(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "trainers.gemma_jax.train", *args]


def run_train(args: list[str], devices: int = 1, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        train_cmd(args),
        cwd=REPO,
        env=cpu_env(devices),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def read_samples(path: str) -> dict[int, list[list[int]]]:
    """step -> story ids per row; a later line for a step replaces an earlier
    one (a restarted run redoes the steps after its checkpoint)."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            out[rec["step"]] = rec["rows"]
    return out


def load_params(ckpt_dir: str, step: int):
    """The trained params of one saved step, as numpy arrays in their saved dtype, onto one local device
    whatever mesh wrote them (the export's own reader; the optimizer state is not read)."""
    import jax  # pylint: disable=g-import-not-at-top

    from trainers.gemma_jax import export_hf  # pylint: disable=g-import-not-at-top

    return jax.tree.map(np.asarray, export_hf.restore_params(os.path.join(os.path.abspath(ckpt_dir), str(step), "state")))


def max_abs_diff(a, b) -> float:
    import jax  # pylint: disable=g-import-not-at-top

    diffs = jax.tree.leaves(jax.tree.map(lambda x, y: float(np.max(np.abs(x - y))), a, b))
    return max(diffs)


PROGRESS_FILE = "progress.json"  # trainers/progress.py: the record beside the checkpoints


def checkpoint_entries(ckpt_dir) -> list[str]:
    """The checkpoint directory's step entries: the progress record and the base model's
    evaluation, which sit beside the steps, left out."""
    return [n for n in os.listdir(ckpt_dir) if not n.startswith(PROGRESS_FILE) and n != model_eval.BASE_FILE]


def read_progress(ckpt_dir) -> dict:
    with open(os.path.join(ckpt_dir, PROGRESS_FILE), encoding="utf-8") as f:
        return json.load(f)
