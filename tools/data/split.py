"""The train/eval split and the batch a run's trainer will use, from the flags its manifest passes.

The JAX trainer holds out the first `--eval_stories` records and trains on the rest in global batches of
`--batch_size` packed rows (trainers/gemma_jax/flags.py); the GPU trainer holds out a seeded
`--eval_fraction` of the records (trainers/trl_gpu/data.py split_rows: datasets' train_test_split, which
rounds the test size up) and trains `--per_device_train_batch_size` x `--gradient_accumulation_steps`
examples per GPU per step (trainers/trl_gpu/args.py).
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass

from core.models import MODELS
from trainers.sft_data import chat


@dataclass(frozen=True)
class Split:
    batch: int  # examples (GPU) or packed rows (JAX) per optimizer step
    steps: int  # 0: until the epochs are consumed
    max_length: int | None  # tokens per example (GPU) or per packed row (JAX)
    how: str
    eval_first: int = 0  # the JAX trainer: this many records at the head held out
    eval_fraction: float = 0.0  # the GPU trainer: this fraction held out
    max_rows: int = 0  # the GPU trainer's --max_samples (0: all)
    gpu: bool = False  # the GPU trainer drops an example longer than max_length; the JAX trainer splits it
    packs: bool = True  # rows packed with several examples (the JAX trainer always; TRL's --packing)
    device_batch: int = 0  # the GPU trainer's examples per device per forward pass (padded to the longest)
    hub_id: str | None = None  # the model's tokenizer on the Hugging Face Hub
    template: str | None = None  # the chat template it names (None: the tokenizer's own)

    def eval_rows(self, rows: int) -> int:
        """Rows held out of `rows` (may exceed them: the caller warns)."""
        if self.eval_fraction:
            # datasets rounds up (datasets/arrow_dataset.py Dataset.train_test_split: n_test = ceil(test_size * n_samples))
            return math.ceil(min(rows, self.max_rows or rows) * self.eval_fraction)
        return self.eval_first

    def train_rows(self, rows: int) -> int:
        return max(min(rows, self.max_rows or rows) - self.eval_rows(rows), 0)


def run_split(run, args: list[str], gpus: int) -> Split | None:
    """The split of a run of a trainer with a flags module; None for one's own container."""
    if run.trainer is None or not run.row.flags_module:
        return None
    flags = importlib.import_module(run.row.flags_module)
    if hasattr(flags, "flag_values"):  # the GPU trainer: TRL's parser, from its snapshot
        v = flags.flag_values(args)
        fraction = float(v.get("eval_fraction") or 0.0)
        batch = int(v["per_device_train_batch_size"]) * int(v.get("gradient_accumulation_steps") or 1) * gpus
        return Split(batch=batch, steps=max(int(v.get("max_steps") or 0), 0), max_length=v.get("max_length"),
                     how=f"{fraction:g} of the rows held out (seeded), {batch} examples a step over {gpus} GPU(s)",
                     eval_fraction=fraction, max_rows=int(v.get("max_samples") or 0), gpu=True,
                     packs=bool(v.get("packing")), device_batch=int(v["per_device_train_batch_size"]),
                     hub_id=v.get("model_id"), template=v.get("chat_template"))
    cfg = flags.parse(args)
    model = MODELS.get(cfg.model)
    return Split(batch=cfg.batch_size, steps=cfg.steps, max_length=cfg.maxlen, eval_first=cfg.eval_stories,
                 how=f"the first {cfg.eval_stories} records held out, global batch {cfg.batch_size} packed rows "
                 f"of {cfg.maxlen} tokens", device_batch=cfg.batch_size, hub_id=model.hub_id if model else None,
                 template=_jax_template(cfg))


def _jax_template(cfg) -> str | None:
    """The JAX trainer's choice (trainers/gemma_jax/cli.py chat_template); None for plain text alone (a mix's
    sources say their own formats, so a run with --data_mix gets the template)."""
    if cfg.data_format == "text" and not cfg.data_mix:
        return None
    return chat.template_choice(cfg.chat_template, cfg.init_from_hf, cfg.model)
