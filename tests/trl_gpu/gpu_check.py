"""GPU check of the cluster path, for a machine with NVIDIA GPUs (not collected
by pytest as a test; on CPU, test_fsdp_cpu.py runs accelerate's FSDP2). A dry run
on CPU (test_gpu_check_dry_run) keeps the script itself working.

    python tests/trl_gpu/gpu_check.py [--gpus N] [--model tiny|gemma3-270m] [--cpu-dry-run]

Through the cluster's launcher and accelerate config (FSDP v2, bf16, the
trainer's activation checkpointing, sharded checkpoints) with packing
(BFD, padding-free) and, on GPUs, Liger kernels, on generated text-to-SQL
data and either a tiny Gemma 4 (31B-style template, empty thought block) or
the real Gemma 3 270M with `--chat_template gemma3`:

1. a run is stopped with SIGTERM after its first checkpoint: expects 143
   and a complete sharded checkpoint;
2. the restart: expects 0, a resume from that checkpoint, a final adapter
   holding LoRA tensors only, the SQL check (execution and exact match),
   and the held-out loss.

Prints the checks and the figures (real tokens/s per GPU, peak GPU memory,
SQL scores) as JSON, and writes them to <work>/gpu_check.json. `--cpu-dry-run`
runs the same sequence with DDP on gloo (2 processes), without Liger.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.trl_gpu import tiny  # noqa: E402

CONFIG = REPO / "trainers" / "trl_gpu" / "accelerate_fsdp_8gpu.yaml"
LAYER = {"tiny": "Gemma4TextDecoderLayer", "gemma3-270m": "Gemma3DecoderLayer"}


def launcher(opts) -> list[str]:
    head = [sys.executable, "-m", "trainers.trl_gpu.launch"]
    if opts.cpu_dry_run:
        return head + ["--multi_gpu", "--num_processes", "2", "--mixed_precision", "no", "--dynamo_backend", "no"]
    return head + ["--config_file", str(CONFIG), "--num_processes", str(opts.gpus),
                   "--fsdp_transformer_layer_cls_to_wrap", LAYER[opts.model]]  # fmt: skip


def model_flags(opts, work: Path) -> list[str]:
    if opts.model == "gemma3-270m":
        return ["--model_id", str(tiny.real_gemma3_dir(work / "gemma3-270m")), "--chat_template", "gemma3"]
    return ["--model_id", str(tiny.build_model_dir(work / "tiny-gemma4-31b", "gemma4-31b"))]


def command(opts, work: Path, out: Path, max_steps: int) -> list[str]:
    data = tiny.write_dataset(work / "sql.jsonl", n=800)
    cmd = launcher(opts) + [
        "-m", "trainers.trl_gpu.sft", *model_flags(opts, work), "--dataset_name", str(data),
        "--output_dir", str(out), "--max_steps", str(max_steps), "--save_steps", "5", "--eval_steps", "100",
        "--packing", "true", "--per_device_train_batch_size", "2", "--gradient_accumulation_steps", "2",
        "--learning_rate", "2e-4", "--logging_steps", "5", "--sql_check_samples", "8", "--sql_check_max_new_tokens", "48",
        *tiny.sql_flags(),  # the shipped text-to-SQL run's data settings (Pulumi.a4.yaml)
    ]  # fmt: skip
    if opts.cpu_dry_run:
        return cmd + ["--use_cpu", "true", "--bf16", "false"]
    return cmd + ["--use_liger_kernel", "true"]


def first_run(cmd: list[str], out: Path, work: Path) -> int:
    log = open(work / "first.log", "w")
    first = subprocess.Popen(cmd, cwd=REPO, env=_env(), stdout=log, stderr=subprocess.STDOUT)
    marker = out / "checkpoint-5" / "checkpoint_complete.json"
    deadline = time.time() + 600
    while not marker.exists() and first.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    first.send_signal(signal.SIGTERM)
    first.wait(timeout=600)
    return first.returncode


def _env() -> dict:
    import os

    env = {k: v for k, v in os.environ.items() if k.startswith(("CUDA", "NVIDIA", "LD_LIBRARY", "HOME", "PATH"))}
    return {**env, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}


def figures(out: Path, gpus: int) -> dict:
    state = max(out.glob("checkpoint-*/trainer_state.json"), key=lambda p: int(p.parent.name.split("-")[1]))
    history = json.loads(state.read_text())["log_history"]
    rates = [h["tokens_per_second"] for h in history if "tokens_per_second" in h][1:]  # the first includes warm-up
    peaks = [h["gpu_peak_memory_gib"] for h in history if "gpu_peak_memory_gib" in h]
    sql = json.loads((out / "sql_check.json").read_text())
    return {
        "real_tokens_per_second_per_gpu": statistics.median(rates) / gpus if rates else None,
        "gpu_peak_memory_gib_rank0": max(peaks) if peaks else None,
        "sql_execution_match": sql["sql_execution_match"],
        "sql_exact_match": sql["sql_exact_match"],
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--model", choices=sorted(LAYER), default="tiny")
    parser.add_argument("--cpu-dry-run", action="store_true")
    parser.add_argument("--work", default=None, help="directory for models, data and logs (default: a new temp dir)")
    opts = parser.parse_args(argv)
    work = Path(opts.work or tempfile.mkdtemp(prefix="gpu-check-"))
    out = work / "run"
    cmd = command(opts, work, out, max_steps=300)
    first_code = first_run(cmd, out, work)
    info = json.loads((out / "run_info.json").read_text())
    stopped = sorted(int(p.parent.name.split("-")[1]) for p in out.glob("checkpoint-*/checkpoint_complete.json"))
    cmd[cmd.index("300")] = str(stopped[-1] + 10)
    second = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=1200)
    (work / "second.log").write_text(second.stdout + second.stderr)
    adapter = out / "adapter_model.safetensors"
    checks = {
        "first exit 143": first_code == 143,
        "distributed type": info["distributed_type"] == ("MULTI_CPU" if opts.cpu_dry_run else "FSDP"),
        "second exit 0": second.returncode == 0,
        "resumed": f"resuming from {out / f'checkpoint-{stopped[-1]}'}" in second.stdout + second.stderr,
        "final adapter, LoRA only": adapter.is_file() and _lora_only(adapter),
        "sql check": (out / "sql_check.json").is_file(),
        "held-out loss": "held-out loss after training" in second.stdout + second.stderr,
    }
    report = {"checks": checks, "figures": figures(out, 2 if opts.cpu_dry_run else opts.gpus) if all(checks.values()) else {}}
    (work / "gpu_check.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2), "\nlogs and outputs in", work)
    return 0 if all(checks.values()) else 1


def _lora_only(path: Path) -> bool:
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        keys = list(f.keys())
    return bool(keys) and all("lora_" in k for k in keys)


if __name__ == "__main__":
    sys.exit(main())
