"""The A4 run's path through accelerate's own FSDP2 code on CPU (fsdp_cpu.py):
the shipped config with 2 processes, gloo and the CPU, a tiny Gemma 4 and a
tiny Gemma 3. A run is stopped by SIGTERM after its first checkpoint and
resumed to its final adapter; every adapter it saved is then reloaded with
PEFT and compared, tensor for tensor, with the others and with what the
trainer held when it resumed."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch
from peft import PeftModel, get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict
from safetensors.torch import load_file
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
from transformers import AutoModelForCausalLM

from tools.status.model import validate_progress
from trainers.trl_gpu.model import lora_config

from . import fsdp_cpu
from .fsdp_cpu import STEPS_AFTER_RESUME, Sequence

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=["gemma4", "gemma3"])
def sequence(request, sql_file, tmp_path_factory) -> tuple[str, Path, Sequence]:
    family = request.param
    model_dir = request.getfixturevalue(f"{family}_dir")
    work = tmp_path_factory.mktemp(f"fsdp-{family}")
    config = fsdp_cpu.cpu_config(work / "accelerate_fsdp_cpu.yaml")
    return family, model_dir, fsdp_cpu.run_sequence(config, family, model_dir, sql_file, work / "run")


def _checkpoint(seq: Sequence, step: int) -> Path:
    return seq.out / f"checkpoint-{step}"


def _sharded_adapter(checkpoint: Path, tmp_path: Path) -> dict[str, torch.Tensor]:
    """The adapter the Trainer restores on resume: accelerate's sharded copy
    (torch.distributed.checkpoint), joined into one state dict."""
    joined = tmp_path / f"{checkpoint.name}.pt"
    dcp_to_torch_save(str(checkpoint / "pytorch_model_fsdp_0"), str(joined))
    return torch.load(joined, weights_only=True).get("model", {})  # absent when nothing was saved


def _reload_with_peft(model_dir: Path, adapter_dir: Path) -> dict[str, torch.Tensor]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(model_dir), adapter_dir)
    missing = [str(w.message) for w in caught if "missing adapter keys" in str(w.message)]
    assert not missing, missing[0][:500]
    return get_peft_model_state_dict(model)


def _assert_same(actual: dict, expected: dict, what: str) -> None:
    assert actual.keys() == expected.keys(), f"{what}: {sorted(actual.keys() ^ expected.keys())[:4]}"
    differ = [k for k in expected if not torch.equal(actual[k], expected[k])]
    assert not differ, f"{what}: {len(differ)} tensors differ, e.g. {differ[0]}"


def _trained(adapter: dict[str, torch.Tensor]) -> bool:
    # LoRA starts with every lora_B at zero; a trained adapter has moved them.
    lora_b = [t for k, t in adapter.items() if "lora_B" in k]
    return bool(lora_b) and all(t.abs().sum() > 0 for t in lora_b)


def test_sigterm_stops_every_rank_after_a_sharded_save(sequence):
    _, _, seq = sequence
    assert seq.first_code == fsdp_cpu.EXIT_TERMINATED, seq.first_log[-4000:]
    info = json.loads((seq.out / "run_info.json").read_text())
    assert info == {"distributed_type": "FSDP", "num_processes": 2, "mixed_precision": "bf16"}
    assert seq.stopped_at >= fsdp_cpu.FIRST_SAVE
    assert seq.first_log.count(f"stopped on request after saving checkpoint-{seq.stopped_at}") == 2
    shards = sorted(p.name for p in (_checkpoint(seq, seq.stopped_at) / "pytorch_model_fsdp_0").glob("*.distcp"))
    assert shards == ["__0_0.distcp", "__1_0.distcp"]  # one shard per rank


def test_every_saved_adapter_reloads_with_peft_to_the_trained_tensors(sequence, tmp_path):
    family, model_dir, seq = sequence
    assert seq.second_code == 0, seq.second_log[-4000:]
    steps = fsdp_cpu.complete_steps(seq.out)
    assert steps[0] == fsdp_cpu.FIRST_SAVE and steps[-1] == seq.stopped_at + STEPS_AFTER_RESUME, steps
    base = AutoModelForCausalLM.from_pretrained(model_dir)
    fresh = get_peft_model(base, lora_config(16, 32, 0.05, base))
    for step in steps:
        checkpoint = _checkpoint(seq, step)
        saved = load_file(str(checkpoint / "adapter_model.safetensors"))
        assert _trained(saved), f"checkpoint-{step}: LoRA at its initial values"
        # The sharded copy the Trainer resumes from holds the same tensors
        # under the same names (accelerate prefixes them with "model.") ...
        sharded = {k.removeprefix("model."): v for k, v in _sharded_adapter(checkpoint, tmp_path).items()}
        _assert_same(sharded, saved, f"checkpoint-{step}: sharded copy vs adapter file")
        # ... which PEFT loads into a fresh LoRA model, every key matching.
        result = set_peft_model_state_dict(fresh, sharded)
        assert not result.unexpected_keys, result.unexpected_keys[:4]
        _assert_same(get_peft_model_state_dict(fresh), saved, f"checkpoint-{step}: sharded copy loaded by PEFT")
        _assert_same(_reload_with_peft(model_dir, checkpoint), saved, f"checkpoint-{step}: PeftModel.from_pretrained")
    # The final adapter is the last step's, and reloads to it.
    final = load_file(str(seq.out / "adapter_model.safetensors"))
    _assert_same(final, load_file(str(_checkpoint(seq, steps[-1]) / "adapter_model.safetensors")), "final vs last")
    _assert_same(_reload_with_peft(model_dir, seq.out), final, f"{family}: final adapter reloaded")


def test_the_resumed_run_continues_from_the_trained_adapter(sequence):
    _, _, seq = sequence
    assert seq.second_code == 0, seq.second_log[-4000:]
    stopped = _checkpoint(seq, seq.stopped_at)
    assert seq.second_log.count(f"resuming from {stopped}") == 2
    # After restoring the sharded checkpoint the trainer gathered the adapter
    # in memory and found it equal to the checkpoint's trained one.
    assert seq.second_log.count(f"resumed adapter equals {stopped}/adapter_model.safetensors") == 2
    resumed_from = load_file(str(stopped / "adapter_model.safetensors"))
    assert _trained(resumed_from)
    # It then trained on: its steps are logged and the adapter moved on.
    state = json.loads((_checkpoint(seq, seq.stopped_at + STEPS_AFTER_RESUME) / "trainer_state.json").read_text())
    logged = [h["step"] for h in state["log_history"] if "loss" in h]
    assert logged[-STEPS_AFTER_RESUME:] == [seq.stopped_at + 1, seq.stopped_at + STEPS_AFTER_RESUME], logged
    final = load_file(str(seq.out / "adapter_model.safetensors"))
    assert any(not torch.equal(final[k], resumed_from[k]) for k in final)


def test_world_process_zero_alone_keeps_the_progress_record(sequence):
    """Two ranks, one record: started twice (SIGTERM, resume), read back as `make status` reads it."""
    _, _, seq = sequence
    record = validate_progress(json.loads((seq.out / "progress.json").read_text()))
    final = seq.stopped_at + STEPS_AFTER_RESUME
    assert (record["starts"], record["step"], record["total_steps"], record["redone_steps"]) == (2, final, final, 0)
    assert seq.stopped_at <= record["checkpoint_step"] <= final
    assert record["restore_seconds"] > 0 and record["train_seconds"] > 0
    assert not list(seq.out.glob("progress.json.tmp-*"))
