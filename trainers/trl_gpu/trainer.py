"""The SFT trainer with throughput logging, and how it is assembled."""

from __future__ import annotations

import logging
import time

from transformers import TrainerCallback
from trl import SFTTrainer

from .checkpoints import CompleteMarker, GracefulStop
from .model import lora_config

log = logging.getLogger(__name__)


class Throughput(TrainerCallback):
    """Tokens per second between two training logs, counted over all processes
    (the Trainer gathers `num_input_tokens_seen` across ranks, padding excluded)."""

    def __init__(self):
        self._mark: tuple[float, int] | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        # After a resume the counter starts from the checkpoint's value.
        self._mark = (time.perf_counter(), state.num_input_tokens_seen)
        return control

    def measure(self, tokens_seen: int) -> dict:
        if self._mark is None:
            return {}
        now = time.perf_counter()
        then, tokens_then = self._mark
        self._mark = (now, tokens_seen)
        if now <= then:
            return {}
        return {"tokens_per_second": (tokens_seen - tokens_then) / (now - then)}


class TextToSqlTrainer(SFTTrainer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.throughput = Throughput()
        self.add_callback(self.throughput)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs:  # a training-step log (eval logs carry eval_loss)
            logs.update(self.throughput.measure(int(self.state.num_input_tokens_seen)))
        super().log(logs, start_time)


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
