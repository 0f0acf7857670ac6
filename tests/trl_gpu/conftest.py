"""Shared fixtures: tiny Gemma models, a text-to-SQL file, and a way to run
the trainer's entry point the way the cluster does (a subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# torch's intra-op threads, a share of the cores per pytest-xdist worker: two workers of a 2-thread pool each
# oversubscribe 2 cores, and OpenMP threads that wait spin (make test-gpu 407 s against 313 s with one thread
# each, docs/benchmarks.md). OMP_NUM_THREADS is read when torch loads, so it is set before anything here imports
# torch; a value set outside is kept. The trainer's own subprocesses take 1 (trainer_env).
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
if _WORKERS:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, len(os.sched_getaffinity(0)) // _WORKERS)))

from . import tiny  # noqa: E402

# Nothing may reach the Hub; a cache of its own keeps runs independent of ~/.cache.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session", autouse=True)
def _hf_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("hf_home")
    old = os.environ.get("HF_HOME")
    os.environ["HF_HOME"] = str(home)
    os.environ.pop("HF_TOKEN", None)
    os.environ.pop("HF_TOKEN_PATH", None)
    yield
    if old is None:
        os.environ.pop("HF_HOME", None)
    else:
        os.environ["HF_HOME"] = old


@pytest.fixture(scope="session")
def gemma4_dir(tmp_path_factory) -> Path:
    return tiny.build_model_dir(tmp_path_factory.mktemp("models") / "tiny-gemma4", "gemma4")


@pytest.fixture(scope="session")
def gemma4_31b_dir(tmp_path_factory) -> Path:
    """Tiny Gemma 4 whose template behaves like 31B-it's (empty thought block in the generation prompt)."""
    return tiny.build_model_dir(tmp_path_factory.mktemp("models") / "tiny-gemma4-31b", "gemma4-31b")


STYLE_FIXTURES = {"gemma4": "gemma4_dir", "gemma4-31b": "gemma4_31b_dir", "gemma3": "gemma3_dir"}


@pytest.fixture(scope="session")
def gemma3_dir(tmp_path_factory) -> Path:
    return tiny.build_model_dir(tmp_path_factory.mktemp("models") / "tiny-gemma3", "gemma3")


@pytest.fixture(scope="session")
def sql_file(tmp_path_factory) -> Path:
    return tiny.write_dataset(tmp_path_factory.mktemp("data") / "text_to_sql.jsonl", n=160)


# Flags that make a CPU run short; each test adds its own.
FAST = [
    "--per_device_train_batch_size", "4",
    "--gradient_accumulation_steps", "1",
    "--activation_checkpointing", "false",
    "--learning_rate", "5e-3",
    "--logging_steps", "2",
    "--dataloader_num_workers", "0",
    "--report_to", "none",
    *tiny.sql_flags(),  # the shipped text-to-SQL run's data settings (Pulumi.a4.yaml)
]  # fmt: skip


def trainer_env(**extra) -> dict:
    env = dict(os.environ)
    env.update({"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


def sft_command(*args) -> list[str]:
    return [sys.executable, "-m", "trainers.trl_gpu.sft", *map(str, args)]


def launch_command(nproc: int, *args) -> list[str]:
    """The cluster's launcher on CPU: torchrun under accelerate, gloo between
    processes (`--use_cpu true` makes accelerate pick MULTI_CPU)."""
    return [
        sys.executable, "-m", "trainers.trl_gpu.launch",
        "--multi_gpu", "--num_processes", str(nproc), "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(_free_port()),
        "-m", "trainers.trl_gpu.sft", "--use_cpu", "true", *map(str, args),
    ]  # fmt: skip


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd: list[str], timeout: int = 300, **env) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        cmd, cwd=REPO, env=trainer_env(**env), capture_output=True, text=True, timeout=timeout, check=False
    )
    proc.output = proc.stdout + proc.stderr
    return proc


def tail(proc, n: int = 4000) -> str:
    return proc.output[-n:]


# Seconds per test file (setups, calls, teardowns), rounded from a measured run (`--durations=60`, two
# workers, this machine under other load too); they only order the files (tests/support/xdist_order.py).
FILE_SECONDS = {
    "test_real_weights.py": 250, "test_distributed.py": 130, "test_trl_parity.py": 110, "test_train.py": 100,
    "test_fsdp_cpu.py": 55, "test_export.py": 25, "test_check_data_tokens.py": 25, "test_sft_formats.py": 20,
    "test_errors.py": 20, "test_data_mix.py": 10,
}


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` (make test-gpu's), the longest file first: the real-weight file (Gemma 3 270M, minutes
    per test) starts at once on one worker while the other takes the rest, and no file queues behind it."""
    from tests.support.xdist_order import files_longest_first  # pylint: disable=g-import-not-at-top

    return files_longest_first(config, log, "tests/trl_gpu", FILE_SECONDS, default_test_seconds=1)
