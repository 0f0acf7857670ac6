"""Several processes on one CPU machine: data parallel with gloo through the
cluster's launcher, SIGTERM across ranks, FSDP2 wrapping, and the refusal to
run an FSDP config that accelerate silently downgrades."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys

import pytest

from trainers import exit_codes
from trainers.trl_gpu.checkpoints import COMPLETE_MARKER

from .conftest import FAST, REPO, _free_port, launch_command, run, tail, trainer_env
from .test_train import _wait_for

FSDP_CONFIG = REPO / "trainers" / "trl_gpu" / "accelerate_fsdp_8gpu.yaml"


@pytest.mark.slow
def test_two_process_data_parallel(gemma4_dir, sql_file, tmp_path):
    out = tmp_path / "run"
    proc = run(launch_command(2, *FAST, "--model_id", gemma4_dir, "--dataset_name", sql_file,
                              "--output_dir", out, "--max_steps", 6, "--save_steps", 3, "--eval_steps", 3,
                              "--sql_check_samples", 3, "--sql_check_max_new_tokens", 8))  # fmt: skip
    assert proc.returncode == exit_codes.OK, tail(proc)
    info = json.loads((out / "run_info.json").read_text())
    assert info == {"distributed_type": "MULTI_CPU", "num_processes": 2, "mixed_precision": "no"}
    # Each optimizer step consumed 2 x 4 examples: the data was split between
    # the ranks, not trained twice by two independent processes.
    train_rows = 160 - 32
    state = json.loads((out / "checkpoint-6" / "trainer_state.json").read_text())
    assert state["epoch"] == pytest.approx(6 / math.ceil(train_rows / 8), rel=1e-6)
    assert {"rng_state_0.pth", "rng_state_1.pth"} <= {p.name for p in (out / "checkpoint-6").iterdir()}
    assert (out / "adapter_model.safetensors").is_file()
    # The SQL check's prompts were split between the ranks and gathered back in order.
    from trainers.sft_data import parts
    from trainers.trl_gpu import data

    from . import tiny

    held_out = data.split_rows(data.load_rows(str(sql_file), "train"), 12_500, 0.2, 42)[1]
    check = json.loads((out / "sql_check.json").read_text())
    # Each result's question: the prompt's last user turn, the template filled with the row's question.
    questions = [parts.prompt_and_answer(tiny.sql_spec(), held_out[i])[0][-1]["content"] for i in range(3)]
    assert [r["question"] for r in check["results"]] == questions
    assert all(row in q for row, q in zip(held_out["sql_prompt"][:3], questions))
    assert check["samples"] == 3 and {"sql_execution_match", "sql_exact_match"} <= set(check)
    assert proc.output.count("SQL on 3 held-out prompts") == 1  # written once, by the main process


@pytest.mark.slow
def test_two_process_sigterm_saves_on_every_rank_then_resumes(gemma4_dir, sql_file, tmp_path):
    out = tmp_path / "run"
    cmd = launch_command(2, *FAST, "--model_id", gemma4_dir, "--dataset_name", sql_file, "--output_dir", out,
                         "--max_steps", 400, "--save_steps", 4, "--eval_strategy", "no")  # fmt: skip
    first = subprocess.Popen(cmd, cwd=REPO, env=trainer_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    _wait_for(out / "checkpoint-4" / COMPLETE_MARKER, first, timeout=180)
    first.send_signal(signal.SIGTERM)  # as the kubelet does to the container's PID 1
    output = first.communicate(timeout=180)[0]
    assert first.returncode == exit_codes.TERMINATED, output[-4000:]
    assert output.count("stopped on request after saving checkpoint-") == 2  # both ranks, same step
    stopped_at = max(int(p.name.split("-")[1]) for p in out.glob("checkpoint-*"))
    assert stopped_at < 400 and (out / f"checkpoint-{stopped_at}" / COMPLETE_MARKER).is_file()

    cmd[cmd.index("400")] = str(stopped_at + 2)
    second = run(cmd)
    assert second.returncode == exit_codes.OK, tail(second)
    assert f"resuming from {out / f'checkpoint-{stopped_at}'}" in second.output
    state = json.loads((out / f"checkpoint-{stopped_at + 2}" / "trainer_state.json").read_text())
    assert state["global_step"] == stopped_at + 2


@pytest.mark.slow
def test_fsdp_config_on_cpu_is_refused_not_silently_downgraded(gemma4_dir, sql_file, tmp_path):
    cmd = [sys.executable, "-m", "trainers.trl_gpu.launch", "--config_file", FSDP_CONFIG, "--num_processes", "2",
           "--main_process_port", str(_free_port()), "-m", "trainers.trl_gpu.sft", *FAST, "--model_id", gemma4_dir,
           "--dataset_name", sql_file, "--output_dir", tmp_path / "run", "--max_steps", 2]  # fmt: skip
    proc = run([str(c) for c in cmd])
    assert proc.returncode == exit_codes.CONFIG_ERROR, tail(proc)
    assert "asks for FSDP, but accelerate set up" in proc.output


@pytest.mark.slow
def test_fsdp2_wraps_each_decoder_layer_from_the_repository_config(gemma4_dir, tmp_path):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(_free_port()),
           str(REPO / "tests" / "trl_gpu" / "fsdp_check.py"), str(FSDP_CONFIG), str(gemma4_dir), str(tmp_path)]  # fmt: skip
    proc = run(cmd)
    assert proc.returncode == 0, tail(proc)
    ranks = [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in (0, 1)]
    for report in ranks:
        assert report["layer_cls"] == "Gemma4TextDecoderLayer" == report["model_decoder_layer_cls"]
        assert report["num_layers"] == report["num_hidden_layers"] == 2
        # One FSDP unit per decoder layer, plus the root.
        assert report["layers_are_units"] and len(report["fsdp_units"]) == 3, report["fsdp_units"]
        assert report["fsdp_units"].count("FSDPGemma4TextDecoderLayer") == 2
        assert report["all_params_sharded"]
        assert report["local_fraction"] == pytest.approx(0.5, abs=0.05)
    # The gathered adapter is the same on both ranks, and the step changed it.
    assert ranks[0]["adapter_after"] == ranks[1]["adapter_after"]
    assert ranks[0]["adapter_before"] != ranks[0]["adapter_after"]
    assert ranks[0]["loss"] != ranks[1]["loss"]  # each rank trained on its own batch
    # The final adapter: the LoRA tensors alone, whole on rank 0 (nothing of
    # the base model gathered), and nothing on the other rank.
    assert ranks[0]["saved_keys"] and all("lora_" in k for k in ranks[0]["saved_keys"])
    assert ranks[1]["saved_keys"] == []
    assert ranks[0]["saved_bytes"] == ranks[0]["trainable_bytes"]
    from safetensors.torch import load_file

    adapter = load_file(str(tmp_path / "adapter" / "adapter_model.safetensors"))
    # PEFT's file drops the adapter name; the tensors are the trained ones.
    checksums = {k.replace(".default", ""): v for k, v in ranks[0]["adapter_after"].items()}
    assert {k: float(v.double().abs().sum()) for k, v in adapter.items()} == pytest.approx(checksums, rel=1e-6)


@pytest.mark.slow
def test_gpu_check_dry_run(tmp_path):
    """tests/trl_gpu/gpu_check.py, the check for a GPU machine, runs its whole
    sequence (SIGTERM, resume, packed training, SQL check, figures) on CPU."""
    proc = run([sys.executable, str(REPO / "tests" / "trl_gpu" / "gpu_check.py"), "--cpu-dry-run",
                "--work", str(tmp_path)], timeout=900)  # fmt: skip
    assert proc.returncode == 0, tail(proc)
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert all(report["checks"].values()), report
    assert report["figures"]["real_tokens_per_second_per_gpu"] > 0
