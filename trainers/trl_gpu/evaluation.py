"""Post-training check: generate answers for held-out prompts and score them as SQL, twice.

The prompt is what inference is given (trainers/sft_data/formats.py
`prompt_and_answer`: a chat's turns before its last assistant turn, or a
plain prompt), the reference the record's answer.

- execution accuracy (`sql_execution_match`): the generated and the reference
  query run on an in-memory SQLite database built from the row's
  `sql_context` and their results are compared (sql_exec.py); rows whose
  context or reference SQLite cannot run are left out of it;
- exact match (`sql_exact_match`) of the normalized query text.

The prompts are split across the ranks, each generating its share one
prompt at a time. Under FSDP every forward pass gathers parameters from all
ranks, so every rank must run as many `generate` calls as the others
(shares are padded with a repeated prompt, whose output is dropped) and
`synced_gpus` keeps a rank that finished early in step. The results are
gathered on the main process, which writes `sql_check.json`.

Generation stops at the template's own end-of-turn marker (templates.py),
whether or not the tokenizer lists it among its special tokens.
"""

from __future__ import annotations

import json
import logging
import os
import re

import torch
import torch.distributed as dist

from trainers.sft_data import formats, parts

from . import sql_exec, templates

log = logging.getLogger(__name__)


def normalize_sql(sql: str) -> str:
    """Whitespace and a trailing semicolon do not change a query."""
    return re.sub(r"\s+", " ", sql).strip().rstrip(";").strip()


def stopping(tokenizer, model) -> tuple[dict, str]:
    """generate() arguments that end the answer: the generation config's and the
    tokenizer's EOS ids, plus the template's end-of-turn marker, as a token id
    when it is one token, else as a stop string; and the marker itself."""
    ids = model.generation_config.eos_token_id
    ids = list(ids) if isinstance(ids, (list, tuple)) else ([ids] if ids is not None else [])
    if tokenizer.eos_token_id is not None:
        ids.append(tokenizer.eos_token_id)
    marker = templates.end_of_turn_marker(tokenizer)
    marker_ids = tokenizer(marker, add_special_tokens=False)["input_ids"]
    kwargs = {}
    if len(marker_ids) == 1:
        ids.append(marker_ids[0])
    else:
        kwargs = {"stop_strings": [marker], "tokenizer": tokenizer}
    return {"eos_token_id": sorted(set(ids)), **kwargs}, marker


def _share(rows: list, rank: int, world: int) -> tuple[list, int]:
    """This rank's rows (every world-th), padded to the longest share; and how many are real."""
    mine = rows[rank::world]
    longest = -(-len(rows) // world)
    padding = [rows[0]] * (longest - len(mine)) if rows else []
    return mine + padding, len(mine)


def _score(row: dict, spec: formats.Spec, generated: str) -> dict:
    prompt, reference = parts.prompt_and_answer(spec, row)
    context = row.get("sql_context")  # the schema the SQL runs against, where the record has one
    return {
        "question": prompt if isinstance(prompt, str) else prompt[-1]["content"],
        "reference": reference,
        "generated": generated,
        "match": normalize_sql(generated) == normalize_sql(reference),
        "execution_match": sql_exec.execution_match(context, reference, generated) if context else None,
    }


def _prompt_ids(tokenizer, spec: formats.Spec, row: dict) -> dict:
    prompt, _ = parts.prompt_and_answer(spec, row)
    if isinstance(prompt, str):  # plain text: BOS, then the prompt, as the trainer tokenizes it
        return tokenizer(prompt, return_tensors="pt", add_special_tokens=True)
    return tokenizer.apply_chat_template(
        prompt, tokenize=True, return_dict=True, add_generation_prompt=True, return_tensors="pt"
    )


@torch.no_grad()
def generate_sql(model, tokenizer, rows, max_new_tokens: int, spec: formats.Spec) -> list[dict]:
    distributed = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    stop, marker = stopping(tokenizer, model)
    share, real = _share(rows, rank, world)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    results = []
    for index, row in enumerate(share):
        prompt = {k: v.to(device) for k, v in _prompt_ids(tokenizer, spec, row).items()}
        output = model.generate(
            **prompt, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id,
            use_cache=True, synced_gpus=distributed, **stop,
        )  # fmt: skip
        if index < real:
            text = tokenizer.decode(output[0, prompt["input_ids"].shape[1] :], skip_special_tokens=True)
            results.append(_score(row, spec, text.split(marker)[0]))
    if was_training:
        model.train()
    if distributed:
        gathered = [None] * world
        dist.all_gather_object(gathered, results)
        # rank r holds rows r, r + world, ...: interleave back into the input order
        results = [gathered[i % world][i // world] for i in range(len(rows))]
    return results


def summarize(results: list[dict]) -> dict:
    scorable = [r for r in results if r["execution_match"] is not None]
    return {
        "samples": len(results),
        "sql_exact_match": sum(r["match"] for r in results) / max(len(results), 1),
        "sql_execution_match": sum(bool(r["execution_match"]) for r in scorable) / max(len(scorable), 1),
        "execution_scorable": len(scorable),
        "results": results,
    }


def run_sql_check(trainer, tokenizer, eval_rows, samples: int, max_new_tokens: int, spec: formats.Spec) -> dict | None:
    if samples <= 0:
        return None
    rows = [eval_rows[i] for i in range(min(samples, len(eval_rows)))]
    report = summarize(generate_sql(trainer.model, tokenizer, rows, max_new_tokens, spec))
    if trainer.is_world_process_zero():
        with open(os.path.join(trainer.args.output_dir, "sql_check.json"), "w") as f:
            json.dump(report, f, indent=2)
        log.info(
            "SQL on %d held-out prompts: execution match %.3f (%d scorable), exact match %.3f",
            report["samples"], report["sql_execution_match"], report["execution_scorable"], report["sql_exact_match"],
        )  # fmt: skip
    trainer.log({k: report[k] for k in ("sql_execution_match", "sql_exact_match")})
    return report
