"""Post-training check: generate SQL for held-out prompts, exact-match it.

Every process runs the same prompts, one at a time, with `synced_gpus` when
distributed: under FSDP each forward pass gathers parameters from all ranks,
so all ranks must run the same number of forward passes. The main process
writes `sql_check.json` and logs the score.
"""

from __future__ import annotations

import json
import logging
import os
import re

import torch
import torch.distributed as dist

from .data import prompt_messages

log = logging.getLogger(__name__)


def normalize_sql(sql: str) -> str:
    """Whitespace and a trailing semicolon do not change a query."""
    return re.sub(r"\s+", " ", sql).strip().rstrip(";").strip()


def end_of_turn_ids(tokenizer, model) -> list[int]:
    """Token ids that end the model's answer: the generation config's EOS ids
    plus the end-of-turn token the chat template closes an answer with."""
    ids = model.generation_config.eos_token_id
    ids = list(ids) if isinstance(ids, (list, tuple)) else ([ids] if ids is not None else [])
    probe = tokenizer.apply_chat_template(
        [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}], tokenize=True, return_dict=True
    )["input_ids"]
    for token_id in reversed(probe):
        if tokenizer.decode([token_id]).strip():
            if token_id in tokenizer.all_special_ids:
                ids.append(token_id)
            break
    if tokenizer.eos_token_id is not None:
        ids.append(tokenizer.eos_token_id)
    return sorted(set(ids))


@torch.no_grad()
def sql_exact_match(model, tokenizer, rows, max_new_tokens: int) -> dict:
    distributed = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
    stop_ids = end_of_turn_ids(tokenizer, model)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    results = []
    for row in rows:
        prompt = tokenizer.apply_chat_template(
            prompt_messages(row), tokenize=True, return_dict=True, add_generation_prompt=True, return_tensors="pt"
        )
        prompt = {k: v.to(device) for k, v in prompt.items()}
        output = model.generate(
            **prompt,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            eos_token_id=stop_ids,
            pad_token_id=tokenizer.pad_token_id,
            use_cache=True,
            synced_gpus=distributed,
        )
        generated = tokenizer.decode(output[0, prompt["input_ids"].shape[1] :], skip_special_tokens=True)
        match = normalize_sql(generated) == normalize_sql(row["sql"])
        results.append({"question": row["sql_prompt"], "reference": row["sql"], "generated": generated, "match": match})
    if was_training:
        model.train()
    score = sum(r["match"] for r in results) / max(len(results), 1)
    return {"sql_exact_match": score, "samples": len(results), "results": results}


def run_sql_check(trainer, tokenizer, eval_rows, samples: int, max_new_tokens: int) -> dict | None:
    if samples <= 0:
        return None
    rows = [eval_rows[i] for i in range(min(samples, len(eval_rows)))]
    report = sql_exact_match(trainer.model, tokenizer, rows, max_new_tokens)
    if trainer.is_world_process_zero():
        with open(os.path.join(trainer.args.output_dir, "sql_check.json"), "w") as f:
            json.dump(report, f, indent=2)
        log.info("SQL exact match on %d held-out prompts: %.3f", report["samples"], report["sql_exact_match"])
    trainer.log({"sql_exact_match": report["sql_exact_match"]})
    return report
