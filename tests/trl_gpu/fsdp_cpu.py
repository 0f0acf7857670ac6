"""The A4 run's path on CPU: `python -m trainers.trl_gpu.launch` with the
shipped accelerate config (trainers/trl_gpu/accelerate_fsdp_8gpu.yaml), 2
processes instead of 8, gloo and the CPU in place of NCCL and the GPUs
(fsdp_cpu_worker.py), a tiny Gemma written by transformers. A first run is
stopped with SIGTERM after its first checkpoint; a second resumes from the
checkpoint that stop saved and ends with the final adapter.

    python -m tests.trl_gpu.fsdp_cpu --out DIR [--family gemma4|gemma3]

(`make fsdp-cpu OUT=DIR`) leaves the model and data in DIR/inputs, the
checkpoints, the final adapter and both runs' logs (first-run.log,
second-run.log) in DIR, and prints a
summary. tests/trl_gpu/test_fsdp_cpu.py runs the same sequence and checks
every saved adapter.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
SHIPPED_CONFIG = REPO / "trainers" / "trl_gpu" / "accelerate_fsdp_8gpu.yaml"
CPU_PROCESSES = 2
# The decoder layer class FSDP wraps: the shipped config names Gemma 4's; a
# Gemma 3 run overrides it on the command line, as README.md says.
LAYER_CLASS = {"gemma4": "Gemma4TextDecoderLayer", "gemma3": "Gemma3DecoderLayer"}
FIRST_SAVE = 2
STEPS_AFTER_RESUME = 2
EXIT_TERMINATED = 143


def cpu_config(target: Path, fsdp_overrides: dict | None = None) -> Path:
    """The shipped config with num_processes for this machine; `fsdp_overrides`
    (other fsdp_config values) only for the tests of refused settings."""
    config = yaml.safe_load(SHIPPED_CONFIG.read_text())
    config["num_processes"] = CPU_PROCESSES
    config["fsdp_config"].update(fsdp_overrides or {})
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(config, sort_keys=False))
    return target


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_command(config: Path, family: str, *trainer_args) -> list[str]:
    return [
        sys.executable, "-m", "trainers.trl_gpu.launch", "--config_file", str(config),
        "--main_process_port", str(_free_port()), "--fsdp_transformer_layer_cls_to_wrap", LAYER_CLASS[family],
        "-m", "tests.trl_gpu.fsdp_cpu_worker", *map(str, trainer_args),
    ]  # fmt: skip


def environment() -> dict:
    env = dict(os.environ)
    env.update({"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
                "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})  # fmt: skip
    return env


def trainer_flags(model_dir: Path, data: Path, out: Path, max_steps: int) -> list:
    """Short CPU settings; LoRA dropout and activation checkpointing keep the
    trainer's defaults (0.05, on), the recompute being part of what is run."""
    return [
        "--model_id", model_dir, "--dataset_name", data, "--output_dir", out, "--max_steps", max_steps,
        "--save_steps", FIRST_SAVE, "--save_total_limit", 50, "--eval_strategy", "no",
        "--per_device_train_batch_size", 2, "--gradient_accumulation_steps", 1, "--learning_rate", "5e-3",
        "--logging_steps", 1, "--report_to", "none", "--dataloader_num_workers", 0, "--max_samples", 100,
        *_sql_flags(),  # the shipped text-to-SQL run's data settings
    ]  # fmt: skip


def _sql_flags() -> list[str]:
    sys.path.insert(0, str(REPO))
    from tests.trl_gpu import tiny  # pylint: disable=import-outside-toplevel  # run as a script too

    return tiny.sql_flags()


@dataclass
class Sequence:
    out: Path
    first_code: int
    first_log: str
    stopped_at: int
    second_code: int
    second_log: str


def complete_steps(out: Path) -> list[int]:
    return sorted(int(p.parent.name.split("-")[1]) for p in out.glob("checkpoint-*/checkpoint_complete.json"))


def _stop_after_first_save(cmd: list[str], out: Path, log_path: Path, timeout: float) -> int:
    marker = out / f"checkpoint-{FIRST_SAVE}" / "checkpoint_complete.json"
    with log_path.open("w") as log:
        first = subprocess.Popen(cmd, cwd=REPO, env=environment(), stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while not marker.exists() and first.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        first.send_signal(signal.SIGTERM)  # as the kubelet does to PID 1
        try:
            return first.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            first.kill()
            return first.wait()


def run_sequence(config: Path, family: str, model_dir: Path, data: Path, out: Path, timeout: float = 300) -> Sequence:
    """SIGTERM after the first checkpoint, then a resume that trains
    STEPS_AFTER_RESUME more steps and saves the final adapter."""
    out.mkdir(parents=True, exist_ok=True)
    first_log, second_log = out / "first-run.log", out / "second-run.log"
    first_cmd = launch_command(config, family, *trainer_flags(model_dir, data, out, 400))
    first_code = _stop_after_first_save(first_cmd, out, first_log, timeout)
    steps = complete_steps(out)
    stopped_at = steps[-1] if steps else 0
    second = subprocess.run(
        launch_command(config, family, *trainer_flags(model_dir, data, out, stopped_at + STEPS_AFTER_RESUME)),
        cwd=REPO, env=environment(), capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    second_log.write_text(second.stdout + second.stderr)
    return Sequence(out, first_code, first_log.read_text(), stopped_at, second.returncode, second_log.read_text())


def write_inputs(directory: Path, family: str) -> tuple[Path, Path]:
    sys.path.insert(0, str(REPO))
    from tests.trl_gpu import tiny

    model_dir = tiny.build_model_dir(directory / f"tiny-{family}", family)
    return model_dir, tiny.write_dataset(directory / "text_to_sql.jsonl", n=100)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="directory for the checkpoints and final adapter")
    parser.add_argument("--family", choices=sorted(LAYER_CLASS), default="gemma4")
    opts = parser.parse_args(argv)
    out = opts.out.resolve()
    model_dir, data = write_inputs(out / "inputs", opts.family)
    config = cpu_config(out / "inputs" / "accelerate_fsdp_cpu.yaml")
    result = run_sequence(config, opts.family, model_dir, data, out)
    summary = {
        "config": str(config), "model": str(model_dir),
        "first_run_exit": result.first_code, "stopped_at_step": result.stopped_at,
        "second_run_exit": result.second_code, "checkpoints": complete_steps(out),
        "final_adapter": str(out / "adapter_model.safetensors"),
        "logs": [str(out / "first-run.log"), str(out / "second-run.log")],
    }  # fmt: skip
    print(json.dumps(summary, indent=2))
    ok = result.first_code == EXIT_TERMINATED and result.second_code == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
