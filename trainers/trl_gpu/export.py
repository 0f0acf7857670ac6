"""The model once trained: eval.json (`--eval_samples`, `--eval_prompts`) and the export (`--export_dir`).

The evaluation runs on every process (under FSDP every forward pass gathers the parameters from all
of them; evaluation.py shares the prompts out): the held-out loss and greedy generations of the
fine-tuned model, then, with the adapter switched off (PEFT's `disable_adapter`, which leaves the base
weights as they were loaded), the same for the base model on the same prompts. The SQL execution
verdicts are evaluation.py's (sql_exec.py runs both queries against the record's own schema in SQLite).

The export runs on the main process only, once the others are done: the base model loaded again in
float32 on the host, the final adapter merged into it (PEFT `merge_and_unload`: W + scale * B @ A)
and cast to `--export_dtype`; or the adapter files alone. Then the tokenizer with its chat template,
eval.json, and the completion marker last (trainers/export_dir.py). Any failure leaves the
checkpoints as they are (nothing here writes below --output_dir) and exits EXPORT_FAILED; a restart
resumes from the final checkpoint and exports again.
"""

from __future__ import annotations

import logging
import os
import shutil

import torch

from trainers import eval_report, export_dir

from . import data, evaluation, model as model_lib
from .args import eval_prompts
from .trainer import ADAPTER_FILE

log = logging.getLogger(__name__)

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
ADAPTER_FILES = (ADAPTER_FILE, "adapter_config.json")


class ExportFailed(Exception):
    """The export could not be written; the message says why."""


def _prompt_rows(prompts: list[str]) -> list[dict]:
    """The stack's own prompts as chats whose answer is to come (prompt_and_answer takes the last turn off)."""
    return [{"messages": [{"role": "user", "content": p}, {"role": "assistant", "content": ""}]} for p in prompts]


def _generations(trainer, rows, spec, max_new_tokens: int) -> list[dict]:
    return evaluation.generate_sql(trainer.model, trainer.processing_class, rows, max_new_tokens, spec)


def _loss(trainer) -> float:
    return float(trainer.evaluate(metric_key_prefix="export_eval")["export_eval_loss"])


def _samples(trainer, script_args, eval_rows) -> tuple[list[dict], list[dict]]:
    """(held-out generations, the stack's own prompts' generations) of the model as it is now."""
    rows = [eval_rows[i] for i in range(min(script_args.eval_samples, len(eval_rows)))]
    held_out = _generations(trainer, rows, data.eval_spec(script_args), script_args.eval_max_new_tokens) if rows else []
    prompts = eval_prompts(script_args)
    own_spec = evaluation.formats.Spec.of("conversational", "", None, script_args.system_prompt)
    own = _generations(trainer, _prompt_rows(prompts), own_spec, script_args.eval_max_new_tokens) if prompts else []
    return held_out, own


def _metric(script_args, held_out: list[dict]) -> str | None:
    if script_args.eval_metric == "none":
        return None
    return eval_report.SQL_EXECUTION if any(r["execution_match"] is not None for r in held_out) else None


def evaluate(trainer, script_args, eval_rows, step: int) -> dict | None:
    """eval.json's record (on the main process; None elsewhere, and without --eval_samples/--eval_prompts)."""
    if script_args.eval_samples <= 0 and not script_args.eval_prompts:
        return None
    loss = _loss(trainer)
    held_out, own = _samples(trainer, script_args, eval_rows)
    base_loss, base_held_out, base_own = None, [], []
    if script_args.eval_compare_base:
        peft_model = trainer.accelerator.unwrap_model(trainer.model)
        with peft_model.disable_adapter():
            base_loss = _loss(trainer)
            base_held_out, base_own = _samples(trainer, script_args, eval_rows)
    samples = [_sample(r, b, True) for r, b in zip(held_out, base_held_out or [None] * len(held_out))]
    samples += [_sample(r, b, False) for r, b in zip(own, base_own or [None] * len(own))]
    body = eval_report.record("trl-gpu", step, loss, base_loss, samples, _metric(script_args, held_out))
    log.info("eval.json: %s", eval_report.summary(body))
    return body if trainer.is_world_process_zero() else None


def _sample(result: dict, base: dict | None, held_out: bool) -> dict:
    return {
        "prompt": result["question"],
        "reference": result["reference"] if held_out else None,
        "model": result["generated"],
        "base": base["generated"] if base else None,
        "model_match": result["execution_match"] if held_out else None,
        "base_match": base["execution_match"] if held_out and base else None,
    }


def export(script_args, training_args, step: int, evaluated: dict | None) -> dict:
    """Write --export_dir (main process only); ExportFailed on any failure."""
    target = script_args.export_dir
    try:
        export_dir.begin(target)
        if script_args.export_merge:
            _merged(script_args, training_args.output_dir, target)
        else:
            for name in ADAPTER_FILES:
                shutil.copy(os.path.join(training_args.output_dir, name), os.path.join(target, name))
        tokenizer = model_lib.load_tokenizer(script_args.model_id, script_args.trust_remote, script_args.use_fast,
                                             script_args.chat_template, script_args.model_revision)
        tokenizer.save_pretrained(target)  # its chat template included (chat_template.jinja)
        if evaluated is not None:
            eval_report.write(target, evaluated)
        marker = export_dir.finish(target, {
            "trainer": "trl-gpu", "run": os.environ.get("GKE_FINETUNE_RUN") or None, "format": "huggingface",
            "merge": script_args.export_merge, "dtype": script_args.export_dtype if script_args.export_merge else None,
            "base_model": script_args.model_id, "base_revision": script_args.model_revision, "step": step,
        })
    except Exception as err:  # pylint: disable=broad-except  # any failure: the export's own exit code
        raise ExportFailed(f"--export_dir={target}: {type(err).__name__}: {err}") from err
    log.info("exported step %d to %s (%d files)", step, target, len(marker["files"]))
    return marker


def _merged(script_args, adapter_dir: str, target: str) -> None:
    from peft import PeftModel  # pylint: disable=import-outside-toplevel

    base = model_lib.load_model(script_args.model_id, False, script_args.trust_remote, False, script_args.model_revision)
    merged = PeftModel.from_pretrained(base, adapter_dir).merge_and_unload()
    merged = merged.to(DTYPES[script_args.export_dtype])
    merged.config.use_cache = True  # load_model turns it off for training; inference wants it
    merged.save_pretrained(target, safe_serialization=True)
