"""The SFT trainer with throughput logging and FSDP adapter saves, and how it is assembled."""

from __future__ import annotations

import logging
import os
import time

import torch
import torch.distributed as dist
from peft import get_peft_model_state_dict
from safetensors.torch import load_file
from torch.distributed.tensor import DTensor
from transformers import TrainerCallback
from transformers.trainer import TRAINING_ARGS_NAME
from trl import SFTTrainer

from trainers import progress as progress_lib
from .checkpoints import CompleteMarker, GracefulStop
from .errors import ConfigError
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
        self.last_busy = 0.0  # the training seconds of the last measure

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
        self.last_busy = max(0.0, busy)
        if busy <= 0:
            return {}
        return {"tokens_per_second": (tokens_seen - tokens_then) / busy}


class ProgressCallback(TrainerCallback):
    """progress.json beside the checkpoints (trainers/progress.py), from world process zero:
    at each training log, each evaluation and each complete checkpoint."""

    def __init__(self, throughput: Throughput, started: float):
        self.throughput, self.started = throughput, started
        self.progress: progress_lib.Progress | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.progress = progress_lib.Progress(
            args.output_dir, "trl-gpu", state.max_steps, self.started, state.is_world_process_zero
        )
        self.progress.resumed(state.global_step)  # the checkpoint's step after a resume
        return control

    def on_step_end(self, args, state, control, **kwargs):
        if self.progress is not None and not self.progress.first_step_seen:
            self.progress.first_step(state.global_step)
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.progress is None or not logs:
            return control
        if "loss" in logs:
            self.progress.trained(state.global_step, self.throughput.last_busy, logs["loss"],
                                  logs.get("tokens_per_second"))
        if "eval_loss" in logs:
            self.progress.evaluated(state.global_step, logs["eval_loss"])
        return control

    def on_save(self, args, state, control, **kwargs):
        # After CompleteMarker (registered first): the checkpoint is complete on every process.
        if self.progress is not None:
            self.progress.checkpointed(state.global_step)
        return control


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


ADAPTER_FILE = "adapter_model.safetensors"


def restored_adapter_problem(peft_model, model, checkpoint: str) -> str | None:
    """On the main process: why the adapter now in `model` is not the one
    `checkpoint` saved in its ADAPTER_FILE (None when it is, tensor for
    tensor); None elsewhere. Every rank must call it (adapter_state_dict).

    Under FSDP the Trainer restores the sharded copy (pytorch_model_fsdp_0,
    through accelerate's load_fsdp_model and PEFT's set_peft_model_state_dict),
    which loads whatever keys match and nothing else: a copy holding no adapter
    leaves LoRA at its initial values without an error. The file is the
    adapter as the trainer saved it; both must agree."""
    state = adapter_state_dict(model)
    if not state:
        return None
    # The file's names: PEFT's, without the adapter name (as save_pretrained writes them).
    restored = get_peft_model_state_dict(peft_model, state_dict=state)
    path = os.path.join(checkpoint, ADAPTER_FILE)
    if not os.path.isfile(path):
        return f"{path} is missing"
    saved = load_file(path)
    if restored.keys() != saved.keys():
        missing = sorted(restored.keys() - saved.keys())[:3]
        return f"{path} lacks {len(restored.keys() - saved.keys())} of the model's adapter tensors (e.g. {missing})"
    differ = [k for k in saved if not torch.equal(saved[k], restored[k].to(saved[k].dtype))]
    if differ:
        return f"{len(differ)} of {len(saved)} restored adapter tensors differ from {path} (e.g. {differ[0]})"
    return None


def agree_on_problem(problem: str | None) -> bool:
    """True on every rank when the main process found a problem."""
    if not (dist.is_available() and dist.is_initialized()):
        return problem is not None
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
    flag = torch.tensor([int(problem is not None)], device=device)
    dist.broadcast(flag, src=0)
    return bool(flag.item())


class FinetuneTrainer(SFTTrainer):
    def __init__(self, *args, started: float | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.throughput = Throughput()
        self.add_callback(self.throughput)
        self.add_callback(ProgressCallback(self.throughput, started if started is not None else time.time()))

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

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model=None) -> None:
        super()._load_from_checkpoint(resume_from_checkpoint, model)
        if not self.is_fsdp_enabled:
            return  # the adapter was restored from ADAPTER_FILE itself
        problem = restored_adapter_problem(self.accelerator.unwrap_model(self.model), self.model, resume_from_checkpoint)
        if agree_on_problem(problem):
            # Resuming from this checkpoint again would fail the same way.
            raise ConfigError(
                f"{resume_from_checkpoint} did not restore the adapter it saved"
                + (f": {problem}" if problem else " (see the main process's log)")
            )
        log.info("resumed adapter equals %s/%s", resume_from_checkpoint, ADAPTER_FILE)

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


def build_trainer(model, tokenizer, script_args, training_args, train_set, eval_set, stopper: GracefulStop,
                  started: float | None = None):
    return FinetuneTrainer(
        started=started,
        model=model,
        args=training_args,
        train_dataset=train_set,
        eval_dataset=eval_set,
        processing_class=tokenizer,
        peft_config=lora_config(script_args.lora_r, script_args.lora_alpha, script_args.lora_dropout, model),
        callbacks=[CompleteMarker(), stopper],
    )
