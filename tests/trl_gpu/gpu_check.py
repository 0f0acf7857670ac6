"""GPU check of the FSDP path, for a machine with NVIDIA GPUs (not collected
by pytest; the CPU suite cannot run accelerate's FSDP).

    python tests/trl_gpu/gpu_check.py [--gpus N] [--cpu-dry-run]

With a tiny Gemma 4 model and generated data, through the cluster's launcher
and accelerate config (FSDP v2, bf16): a run is stopped with SIGTERM after
its first checkpoint (expects 143 and a complete sharded checkpoint), then
restarted (expects 0, a resume from that checkpoint, the final adapter, the
SQL check and eval loss). `--cpu-dry-run` runs the same sequence with DDP on
gloo instead, to check the script itself without a GPU.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.trl_gpu import tiny  # noqa: E402

CONFIG = REPO / "trainers" / "trl_gpu" / "accelerate_fsdp_8gpu.yaml"


def launcher(gpus: int, dry_run: bool) -> list[str]:
    head = [sys.executable, "-m", "trainers.trl_gpu.launch"]
    if dry_run:
        return head + ["--multi_gpu", "--num_processes", "2", "--mixed_precision", "no", "--dynamo_backend", "no"]
    return head + ["--config_file", str(CONFIG), "--num_processes", str(gpus)]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--cpu-dry-run", action="store_true")
    opts = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    model_dir = tiny.build_model_dir(work / "tiny-gemma4", "gemma4")
    data = tiny.write_dataset(work / "sql.jsonl", n=400)
    out = work / "run"
    cmd = launcher(opts.gpus, opts.cpu_dry_run) + [
        "-m", "trainers.trl_gpu.sft", "--model_id", str(model_dir), "--dataset_name", str(data),
        "--output_dir", str(out), "--max_steps", "300", "--save_steps", "5", "--eval_steps", "100",
        "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "1", "--learning_rate", "5e-3",
        "--logging_steps", "5", "--sql_check_samples", "2", "--sql_check_max_new_tokens", "16",
    ] + (["--use_cpu", "true", "--bf16", "false"] if opts.cpu_dry_run else [])  # fmt: skip
    env = {"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    log = open(work / "first.log", "w")
    first = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    marker = out / "checkpoint-5" / "checkpoint_complete.json"
    deadline = time.time() + 300
    while not marker.exists() and first.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    first.send_signal(signal.SIGTERM)
    first.wait(timeout=300)
    info = json.loads((out / "run_info.json").read_text())
    print("first run:", first.returncode, info, sorted(p.name for p in out.glob("checkpoint-*")))
    stopped = sorted(int(p.parent.name.split("-")[1]) for p in out.glob("checkpoint-*/checkpoint_complete.json"))
    cmd[cmd.index("300")] = str(stopped[-1] + 10)
    second = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    (work / "second.log").write_text(second.stdout + second.stderr)
    checks = {
        "first exit 143": first.returncode == 143,
        "distributed type": info["distributed_type"] == ("MULTI_CPU" if opts.cpu_dry_run else "FSDP"),
        "second exit 0": second.returncode == 0,
        "resumed": f"resuming from {out / f'checkpoint-{stopped[-1]}'}" in second.stdout + second.stderr,
        "final adapter": (out / "adapter_model.safetensors").is_file(),
        "sql check": (out / "sql_check.json").is_file(),
    }
    print(json.dumps(checks, indent=2), "\nlogs and outputs in", work)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
