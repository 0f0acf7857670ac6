"""Run under torchrun on CPU (gloo): shard a tiny Gemma 4 LoRA model with
torch's FSDP2 (`fully_shard`) exactly as the repository's accelerate config
asks (FSDP v2, transformer-layer wrap of the class it names), train one step
and gather the adapter. Each rank writes what it saw to <out>/rank-<r>.json.

This checks torch's FSDP2 alone, with the config's wrapping: the layer class
named in the config must exist in the model, be its decoder layer, and
become the FSDP units. accelerate's own FSDP2 preparation, saves and loads
run on CPU in test_fsdp_cpu.py (fsdp_cpu.py). The final adapter is saved the way
the trainer saves it under FSDP (trainer.adapter_state_dict: the LoRA
tensors alone, gathered onto rank 0), into <out>/adapter.
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist
import yaml
from peft import get_peft_model
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.tensor import DTensor, Shard
from transformers import AutoModelForCausalLM

from trainers.trl_gpu.model import decoder_layer_class, lora_config
from trainers.trl_gpu.trainer import adapter_state_dict


def main(config_path: str, model_dir: str, out: str) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    fsdp = yaml.safe_load(open(config_path))["fsdp_config"]
    layer_cls = fsdp["fsdp_transformer_layer_cls_to_wrap"]

    torch.manual_seed(0)  # same LoRA init on every rank, as accelerate broadcasts it
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(model_dir), lora_config(8, 16, 0.0))
    layers = [m for m in model.modules() if type(m).__name__ == layer_cls]
    decoder_cls = decoder_layer_class(model)  # before fully_shard renames the classes (FSDP<name>)
    mesh = init_device_mesh("cpu", (world,))
    for layer in layers:
        fully_shard(layer, mesh=mesh, reshard_after_forward=fsdp["fsdp_reshard_after_forward"])
    fully_shard(model, mesh=mesh)

    units = [type(m).__name__ for m in model.modules() if isinstance(m, FSDPModule)]
    layers_are_units = all(isinstance(layer, FSDPModule) for layer in layers)
    sharded = all(isinstance(p, DTensor) and p.placements == (Shard(0),) for p in model.parameters())
    local = sum(p.to_local().numel() for p in model.parameters())
    total = sum(p.numel() for p in model.parameters())

    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-2)
    generator = torch.Generator().manual_seed(100 + rank)  # each rank its own batch
    ids = torch.randint(3, model.config.vocab_size, (2, 16), generator=generator)
    before = _adapter_checksum(model)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    after = _adapter_checksum(model)

    saved = adapter_state_dict(model)
    if rank == 0:
        model.save_pretrained(os.path.join(out, "adapter"), state_dict=saved)

    report = {
        "saved_keys": sorted(saved),
        "saved_bytes": sum(t.numel() * t.element_size() for t in saved.values()),
        "trainable_bytes": sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad),
        "layer_cls": layer_cls,
        "model_decoder_layer_cls": decoder_cls,
        "layers_are_units": layers_are_units,
        "num_layers": len(layers),
        "num_hidden_layers": model.config.num_hidden_layers,
        "fsdp_units": units,
        "all_params_sharded": sharded,
        "local_fraction": local / total,
        "adapter_before": before,
        "adapter_after": after,
        "loss": loss.item(),
    }
    with open(os.path.join(out, f"rank-{rank}.json"), "w") as f:
        json.dump(report, f)
    # Both ranks past their last collective before either tears down gloo: a rank that destroyed its group
    # while the other still had a transfer in flight aborted under load ("terminate called without an
    # active exception", exit -6).
    dist.barrier()
    dist.destroy_process_group()


def _adapter_checksum(model) -> dict[str, float]:
    """The full (gathered) adapter, reduced to one number per tensor."""
    options = StateDictOptions(full_state_dict=True, cpu_offload=False, ignore_frozen_params=True)
    state = get_model_state_dict(model, options=options)
    return {k: float(v.double().abs().sum()) for k, v in state.items() if "lora_" in k}


if __name__ == "__main__":
    main(*sys.argv[1:4])
