"""Why the shipped accelerate config turns FSDP activation checkpointing off
and the trainer recomputes layers itself, shown on the pinned libraries'
own functions (one process, a tiny Gemma 4): accelerate's FSDP2 activation
checkpointing (fsdp2_apply_ac) loses the adapter in both save paths and
draws other LoRA dropout masks in the recompute; the trainer's setting
(HF activation checkpointing with its kwargs) does neither."""

from __future__ import annotations

import copy
import types
import warnings

import pytest
import torch
from accelerate.utils import FullyShardedDataParallelPlugin
from accelerate.utils.fsdp_utils import fsdp2_apply_ac
from peft import PeftModel, get_peft_model, get_peft_model_state_dict
from transformers import AutoModelForCausalLM

from trainers.trl_gpu.args import parse_args
from trainers.trl_gpu.model import lora_config
from trainers.trl_gpu.trainer import adapter_state_dict, restored_adapter_problem

LAYER = "Gemma4TextDecoderLayer"


def _lora_model(model_dir, dropout: float = 0.05):
    base = AutoModelForCausalLM.from_pretrained(model_dir)
    torch.manual_seed(0)
    model = get_peft_model(base, lora_config(8, 16, dropout, base))
    # Trained-looking LoRA: lora_B starts at zero, which would hide a lost adapter.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.1)
    return model


def _accelerate_activation_checkpointing(model):
    """What accelerate does to the model with fsdp_activation_checkpointing: true."""
    plugin = FullyShardedDataParallelPlugin(
        fsdp_version=2, auto_wrap_policy="transformer_based_wrap",
        transformer_cls_names_to_wrap=[LAYER], activation_checkpointing=True,
    )  # fmt: skip
    return fsdp2_apply_ac(types.SimpleNamespace(state=types.SimpleNamespace(fsdp_plugin=plugin)), model)


def _trainer_activation_checkpointing(model):
    """What the Trainer does with the trainer's --activation_checkpointing (its default)."""
    _, training = parse_args([])
    assert training.activation_checkpointing
    model.base_model.model.activation_checkpointing_enable(activation_checkpointing_kwargs=training.activation_checkpointing_kwargs)
    return model


SETTINGS = {"fsdp_activation_checkpointing": _accelerate_activation_checkpointing, "trainer": _trainer_activation_checkpointing}


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_checkpoints_and_the_final_adapter_keep_the_adapter(setting, gemma4_dir, tmp_path):
    model = _lora_model(gemma4_dir)
    trained = get_peft_model_state_dict(model)
    SETTINGS[setting](model)
    # A sharded checkpoint: accelerate's save_fsdp_model(adapter_only=True) keeps
    # what get_peft_model_state_dict returns (accelerate/utils/fsdp_utils.py, _get_model_state_dict).
    checkpoint = get_peft_model_state_dict(model)
    # The final adapter and --push_to_hub: the trainer's save (FinetuneTrainer.save_model).
    model.save_pretrained(tmp_path, state_dict=adapter_state_dict(model))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reloaded = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(gemma4_dir), tmp_path)
    missing = [w for w in caught if "missing adapter keys" in str(w.message)]
    final = get_peft_model_state_dict(reloaded)
    if setting == "fsdp_activation_checkpointing":  # what the old shipped config did
        assert checkpoint == {}
        assert missing and all(t.abs().sum() == 0 for k, t in final.items() if "lora_B" in k)
        return
    assert checkpoint.keys() == trained.keys() and all(torch.equal(checkpoint[k], trained[k]) for k in trained)
    assert not missing and all(torch.equal(final[k], trained[k]) for k in trained)


def _lora_gradients(model, ids) -> dict[str, torch.Tensor]:
    model.train()
    torch.manual_seed(1234)  # the same dropout masks in every variant's forward
    model(input_ids=ids, labels=ids).loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_the_recompute_draws_the_forward_s_lora_dropout_masks(setting, gemma4_dir):
    reference_model = _lora_model(gemma4_dir, dropout=0.05)  # the trainer's default --lora_dropout
    model = SETTINGS[setting](copy.deepcopy(reference_model))
    # Attention runs inside the layer's checkpointed forward: once in the
    # forward, once more when backward recomputes the layer.
    attention_calls = []
    for name, module in model.named_modules():
        if name.endswith(".self_attn"):
            module.register_forward_pre_hook(lambda *_: attention_calls.append(1))
    ids = torch.randint(3, reference_model.config.vocab_size, (2, 24), generator=torch.Generator().manual_seed(0))
    reference = _lora_gradients(reference_model, ids)
    grads = {n.replace("._checkpoint_wrapped_module", ""): g for n, g in _lora_gradients(model, ids).items()}
    assert len(attention_calls) == 2 * reference_model.config.num_hidden_layers
    worst = max((grads[n] - reference[n]).abs().max().item() for n in reference)
    if setting == "fsdp_activation_checkpointing":  # preserve_rng_state=False: other masks, other gradients
        assert worst > 1e-3, worst
    else:
        assert worst == 0.0, worst


def test_the_resume_check_tells_a_restored_adapter_from_one_left_at_its_initial_values(gemma4_dir, tmp_path):
    model = _lora_model(gemma4_dir)
    model.save_pretrained(tmp_path, state_dict=adapter_state_dict(model))  # as FinetuneTrainer.save_model
    assert restored_adapter_problem(model, model, str(tmp_path)) is None
    with torch.no_grad():  # what a resume from a checkpoint without the adapter leaves
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.zero_()
    problem = restored_adapter_problem(model, model, str(tmp_path))
    lora_b = sum("lora_B" in name for name, _ in model.named_parameters())
    assert problem.startswith(f"{lora_b} of {2 * lora_b} restored adapter tensors differ from {tmp_path}/"), problem
    assert "is missing" in restored_adapter_problem(model, model, str(tmp_path / "elsewhere"))
