"""Training on CPU through the trainer's own code paths and entry point."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
from peft import PeftModel
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from tools.status.model import validate_progress
from trainers import exit_codes
from trainers.trl_gpu import data
from trainers.trl_gpu.args import parse_args
from trainers.trl_gpu.checkpoints import COMPLETE_MARKER
from trainers.trl_gpu.training import build, save_final

from . import tiny
from .conftest import FAST, REPO, run, sft_command, tail, trainer_env

# Resumed and uninterrupted runs do the same float operations in the same
# order on CPU, so their adapters agree to rounding; this is the bound asserted.
RESUME_TOLERANCE = 1e-6


@pytest.mark.slow
@pytest.mark.parametrize("family", ["gemma4", "gemma3"])
def test_lora_sft_lowers_loss_and_adapter_reloads_identically(family, request, sql_file, tmp_path):
    model_dir = request.getfixturevalue(f"{family}_dir")
    script, training = parse_args(
        ["--model_id", str(model_dir), "--dataset_name", str(sql_file), "--output_dir", str(tmp_path),
         "--max_steps", "40", "--eval_strategy", "no", "--learning_rate", "1e-2", *FAST]
    )  # fmt: skip
    trainer, _, _ = build(script, training)
    trainable = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)

    before = trainer.evaluate()["eval_loss"]
    trainer.train()
    after = trainer.evaluate()["eval_loss"]
    print(f"{family}: held-out loss {before:.3f} -> {after:.3f}")
    assert after < before - 0.5, (before, after)

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    ids = torch.tensor([data.tokenize_example(_row(), tokenizer, tiny.sql_spec())["input_ids"]])
    trainer.model.eval()
    with torch.no_grad():
        trained_logits = trainer.model(input_ids=ids).logits
    save_final(trainer, training.output_dir)
    assert (tmp_path / "adapter_model.safetensors").is_file()

    reloaded = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(model_dir), tmp_path).eval()
    with torch.no_grad():
        reloaded_logits = reloaded(input_ids=ids).logits
    torch.testing.assert_close(reloaded_logits, trained_logits, rtol=0, atol=1e-6)
    with torch.no_grad():
        base_logits = AutoModelForCausalLM.from_pretrained(model_dir).eval()(input_ids=ids).logits
    assert not torch.allclose(base_logits, trained_logits, atol=1e-3)  # the adapter is not a no-op


def _row():
    return tiny.sql_rows(1, seed=99)[0]


def _tensorboard_tags(log_dir: Path) -> set[str]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags = set()
    for events in log_dir.rglob("events.out.tfevents.*"):
        acc = EventAccumulator(str(events))
        acc.Reload()
        tags |= set(acc.Tags()["scalars"])
    return tags


@pytest.mark.slow
def test_entry_point_end_to_end(gemma4_dir, sql_file, tmp_path):
    out, logs = tmp_path / "run", tmp_path / "profile" / "tb"
    args = [*FAST, "--report_to", "tensorboard", "--model_id", gemma4_dir, "--dataset_name", sql_file,
            "--output_dir", out, "--logging_dir", logs, "--max_steps", "8", "--save_steps", "4",
            "--eval_steps", "4", "--sql_check_samples", "2", "--sql_check_max_new_tokens", "16",
            "--merge_adapter", "true"]  # fmt: skip
    proc = run(sft_command(*args))
    assert proc.returncode == exit_codes.OK, tail(proc)

    assert (out / "adapter_model.safetensors").is_file() and (out / "adapter_config.json").is_file()
    for step in (4, 8):
        assert (out / f"checkpoint-{step}" / COMPLETE_MARKER).is_file()
        assert (out / f"checkpoint-{step}" / "optimizer.pt").is_file()
    assert json.loads((out / "run_info.json").read_text())["distributed_type"] == "NO"
    check = json.loads((out / "sql_check.json").read_text())
    assert check["samples"] == 2 and 0.0 <= check["sql_exact_match"] <= 1.0
    assert {"reference", "generated", "match"} <= set(check["results"][0])

    # The merged model computes what base + adapter computes.
    ids = torch.tensor([data.tokenize_example(_row(), AutoTokenizer.from_pretrained(gemma4_dir), tiny.sql_spec())[
        "input_ids"]])
    with torch.no_grad():
        adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(gemma4_dir), out).eval()
        merged = AutoModelForCausalLM.from_pretrained(out / "merged").eval()
        # W + BA is summed before the matmul instead of after: equal up to float rounding.
        torch.testing.assert_close(merged(input_ids=ids).logits, adapted(input_ids=ids).logits, rtol=1e-4, atol=1e-4)
    assert (out / "merged" / "tokenizer_config.json").is_file()

    tags = _tensorboard_tags(logs)
    assert {"train/loss", "train/tokens_per_second", "eval/loss", "train/learning_rate", "train/sql_exact_match"} <= tags, tags
    history = json.loads((out / "checkpoint-8" / "trainer_state.json").read_text())["log_history"]
    rates = [h["tokens_per_second"] for h in history if "tokens_per_second" in h]
    assert rates and all(r > 0 for r in rates)

    # The progress record world process zero wrote beside the checkpoints (trainers/progress.py).
    record = validate_progress(json.loads((out / "progress.json").read_text()))  # as `make status` reads it
    assert (record["schema"], record["trainer"], record["starts"], record["redone_steps"]) == (1, "trl-gpu", 1, 0)
    assert (record["step"], record["total_steps"], record["checkpoint_step"]) == (8, 8, 8)
    last_train = [h for h in history if "loss" in h][-1]
    assert record["loss"] == pytest.approx(last_train["loss"])
    assert record["tokens_per_s"] == pytest.approx(rates[-1])
    assert record["eval_step"] == 8 and record["eval_loss"] > 0  # the final held-out loss
    assert record["train_seconds"] > 0 and record["restore_seconds"] > 0
    assert record["started_at"] == record["attempt_started_at"] <= record["updated_at"]
    assert not list(out.glob("progress.json.tmp-*"))  # renamed into place, nothing left behind


def _adapter(path: Path) -> dict[str, torch.Tensor]:
    return load_file(str(path / "adapter_model.safetensors"))


def _losses(path: Path) -> dict[int, float]:
    state = json.loads((path / "trainer_state.json").read_text())
    return {h["step"]: h["loss"] for h in state["log_history"] if "loss" in h}


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while not path.exists():
        assert proc.poll() is None, "the run ended before the checkpoint appeared"
        assert time.time() < deadline, f"no {path} after {timeout}s"
        time.sleep(0.05)


RESUME_STEPS = 48


def _resume_args(gemma4_dir, sql_file) -> list:
    return [*FAST, "--model_id", gemma4_dir, "--dataset_name", sql_file, "--max_steps", RESUME_STEPS,
            "--save_steps", "4", "--eval_strategy", "no", "--logging_steps", "1", "--lora_dropout", "0.1"]  # fmt: skip


@pytest.fixture(scope="module")
def uninterrupted_run(gemma4_dir, sql_file, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("uninterrupted") / "run"
    proc = run(sft_command(*_resume_args(gemma4_dir, sql_file), "--output_dir", out))
    assert proc.returncode == 0, tail(proc)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_kill_then_restart_resumes_and_matches_uninterrupted_run(sig, uninterrupted_run, gemma4_dir, sql_file, tmp_path):
    common, resumed = _resume_args(gemma4_dir, sql_file), tmp_path / "resumed"
    first = subprocess.Popen(
        sft_command(*common, "--output_dir", resumed), cwd=REPO, env=trainer_env(),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    _wait_for(resumed / "checkpoint-8" / COMPLETE_MARKER, first)
    first.send_signal(sig)
    output = first.communicate(timeout=120)[0]
    # SIGTERM: the step finishes, a checkpoint is saved, exit 143.
    # SIGKILL: nothing runs; the restart falls back on the last complete checkpoint.
    assert first.returncode == (exit_codes.TERMINATED if sig == signal.SIGTERM else -signal.SIGKILL), output[-4000:]
    complete = sorted(int(p.parent.name.split("-")[1]) for p in resumed.glob(f"checkpoint-*/{COMPLETE_MARKER}"))
    stopped_at = complete[-1]
    assert 8 <= stopped_at < RESUME_STEPS, complete
    state = json.loads((resumed / f"checkpoint-{stopped_at}" / "trainer_state.json").read_text())
    assert state["global_step"] == stopped_at
    assert not (resumed / "adapter_model.safetensors").exists()  # no final save when stopped

    # A save cut short by the kill: a newer checkpoint without the marker.
    partial = resumed / f"checkpoint-{stopped_at + 1}"
    partial.mkdir(exist_ok=True)
    (partial / "adapter_model.safetensors").write_bytes(b"truncated")

    first_record = json.loads((resumed / "progress.json").read_text())
    assert first_record["starts"] == 1 and first_record["step"] >= stopped_at

    second = run(sft_command(*common, "--output_dir", resumed))
    assert second.returncode == 0, tail(second)
    record = json.loads((resumed / "progress.json").read_text())
    assert (record["starts"], record["step"], record["checkpoint_step"]) == (2, RESUME_STEPS, RESUME_STEPS)
    # Steps trained after checkpoint-<stopped_at> were trained again: counted as redone (none on SIGTERM).
    assert record["redone_steps"] == first_record["step"] - stopped_at
    assert record["started_at"] == first_record["started_at"]
    assert record["restore_seconds"] > first_record["restore_seconds"] > 0
    assert f"resuming from {resumed / f'checkpoint-{stopped_at}'}" in second.output
    assert f"removed incomplete checkpoint {partial}" in second.output

    # Same losses after the resume point (data order, optimizer, scheduler and
    # dropout RNG restored), and the same final adapter.
    reference = uninterrupted_run
    ref_losses = _losses(reference / f"checkpoint-{RESUME_STEPS}")
    res_losses = _losses(resumed / f"checkpoint-{RESUME_STEPS}")
    after = [s for s in ref_losses if s > stopped_at]
    assert after and all(abs(ref_losses[s] - res_losses[s]) <= 1e-5 for s in after), (ref_losses, res_losses)
    ref, res = _adapter(reference), _adapter(resumed)
    assert ref.keys() == res.keys()
    worst = max((ref[k] - res[k]).abs().max().item() for k in ref)
    print(f"{sig.name}: resumed at step {stopped_at}; largest adapter difference {worst:.3g}")
    assert worst <= RESUME_TOLERANCE, worst
