"""The SFT trainer with throughput logging and FSDP adapter saves, and how it is assembled."""

from __future__ import annotations

import logging
import os
import time

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor
from transformers import TrainerCallback
from transformers.trainer import TRAINING_ARGS_NAME
from trl import SFTTrainer

from .checkpoints import CompleteMarker, GracefulStop
from .model import lora_config

log = logging.getLogger(__name__)


class Throughput(TrainerCallback):
    """Real tokens per second of training between two training logs, counted
    over all processes (the Trainer gathers `num_input_tokens_seen` across
    ranks, padding excluded). Time spent evaluating or saving checkpoints in
    between is not training time and is left out (`pause`)."""

    def __init__(self):
        self._mark: tuple[float, int] | None = None
        self._paused = 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        # After a resume the counter starts from the checkpoint's value.
        self._mark = (time.perf_counter(), state.num_input_tokens_seen)
        self._paused = 0.0
        return control

    def pause(self, seconds: float) -> None:
        self._paused += seconds

    def measure(self, tokens_seen: int) -> dict:
        if self._mark is None:
            return {}
        now = time.perf_counter()
        then, tokens_then = self._mark
        busy = now - then - self._paused
        self._mark, self._paused = (now, tokens_seen), 0.0
        if busy <= 0:
            return {}
        return {"tokens_per_second": (tokens_seen - tokens_then) / busy}


def adapter_state_dict(model) -> dict[str, torch.Tensor]:
    """The trainable (LoRA) tensors, whole, on the main process; an empty dict
    elsewhere. Works on FSDP2-sharded and plain modules alike, and gathers
    the trainable parameters only: torch's get_model_state_dict with
    ignore_frozen_params would still gather buffers and the tied LM head
    (a tied weight is not among named_parameters, so it is not seen as
    frozen). Every rank must call it: each DTensor.full_tensor() is an
    all-gather, done in the same parameter order on every rank."""
    main = not (dist.is_available() and dist.is_initialized()) or dist.get_rank() == 0
    state = {}
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        full = param.full_tensor() if isinstance(param, DTensor) else param
        if main:
            state[name] = full.detach().to("cpu", copy=True)
    return state


class TextToSqlTrainer(SFTTrainer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.throughput = Throughput()
        self.add_callback(self.throughput)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs:  # a training-step log (eval logs carry eval_loss)
            logs.update(self.throughput.measure(int(self.state.num_input_tokens_seen)))
            if torch.cuda.is_available():  # this process's GPU, since the start
                logs["gpu_peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
        super().log(logs, start_time)

    def evaluate(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return super().evaluate(*args, **kwargs)
        finally:
            self.throughput.pause(time.perf_counter() - start)

    def _save_checkpoint(self, model, trial) -> None:
        start = time.perf_counter()
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self.throughput.pause(time.perf_counter() - start)

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """Under FSDP, the adapter alone: Trainer.save_model would gather the
        full state dict (the whole 31B base model) onto rank 0 only for PEFT
        to keep the LoRA tensors of it (for the final save and again for
        push_to_hub). Checkpoints keep the Trainer's sharded format."""
        if not self.is_fsdp_enabled:
            return super().save_model(output_dir, _internal_call)
        output_dir = output_dir or self.args.output_dir
        state = adapter_state_dict(self.model)
        if self.args.should_save:
            os.makedirs(output_dir, exist_ok=True)
            self.accelerator.unwrap_model(self.model).save_pretrained(output_dir, state_dict=state)
            self.processing_class.save_pretrained(output_dir)
            torch.save(self.args, os.path.join(output_dir, TRAINING_ARGS_NAME))
        if self.args.push_to_hub and not _internal_call:
            self.push_to_hub(commit_message="Model save", revision=self.args.hub_revision)


def build_trainer(model, tokenizer, script_args, training_args, train_set, eval_set, stopper: GracefulStop):
    return TextToSqlTrainer(
        model=model,
        args=training_args,
        train_dataset=train_set,
        eval_dataset=eval_set,
        processing_class=tokenizer,
        peft_config=lora_config(script_args.lora_r, script_args.lora_alpha, script_args.lora_dropout, model),
        callbacks=[CompleteMarker(), stopper],
    )
