"""eval.json of a run with --export_hf and eval flags (trainers/eval_report.py): the held-out loss
and greedy generations of --eval_prompts, by the trained model and by the model the run started from.

The base model's figures are taken when the run starts from scratch (step 0, before any update) and
kept in `base_eval.json` beside the checkpoints, so a run restarted later still compares with them.
Its held-out split is packed token rows, without prompts: the prompts are the stack's (`eval.prompts`),
else the trainer's --sample_prompt. This trainer computes no task metric.
"""

from __future__ import annotations

import json
import os

from trainers import eval_report

BASE_FILE = "base_eval.json"


def wanted(cfg) -> bool:
    return bool(cfg.export_hf)


def prompts(cfg) -> list[str]:
    if cfg.eval_prompts:
        found = json.loads(cfg.eval_prompts)
        if not (isinstance(found, list) and all(isinstance(p, str) and p.strip() for p in found)):
            raise ValueError(f"--eval_prompts={cfg.eval_prompts!r}: expected a JSON list of prompts with text")
        return found
    return [cfg.sample_prompt]


def generate(parts, params, cfg) -> list[str]:
    """Greedy continuations of the prompts (every process takes part)."""
    from gemma import gm  # pylint: disable=g-import-not-at-top

    sampler = gm.text.Sampler(model=parts.model, params=params, tokenizer=parts.tokenizer,
                              cache_length=1024, max_out_length=cfg.eval_max_new_tokens + 8)
    return [sampler.sample(p, max_new_tokens=cfg.eval_max_new_tokens) for p in prompts(cfg)]


def keep_base(cfg, parts, params, loss: float | None, owner: bool) -> None:
    """At step 0 of a fresh run: the base model's loss and generations, beside the checkpoints."""
    if not wanted(cfg) or cfg.eval_compare_base != "true":
        return
    texts = generate(parts, params, cfg)
    if owner and "://" not in cfg.checkpoint_dir:
        os.makedirs(cfg.checkpoint_dir, exist_ok=True)
        with open(os.path.join(cfg.checkpoint_dir, BASE_FILE), "w", encoding="utf-8") as f:
            json.dump({"loss": loss, "prompts": prompts(cfg), "generated": texts}, f)


def _base(cfg) -> dict:
    try:
        with open(os.path.join(cfg.checkpoint_dir, BASE_FILE), encoding="utf-8") as f:
            base = json.load(f)
    except (OSError, ValueError):
        return {}
    return base if base.get("prompts") == prompts(cfg) else {}


def record(cfg, parts, params, loss: float | None, step: int) -> dict:
    """eval.json's record of the trained model (every process generates; process 0 writes it)."""
    texts = generate(parts, params, cfg)
    base = _base(cfg) if cfg.eval_compare_base == "true" else {}
    base_texts = base.get("generated") or [None] * len(texts)
    samples = [{"prompt": p, "reference": None, "model": t, "base": b, "model_match": None, "base_match": None}
               for p, t, b in zip(prompts(cfg), texts, base_texts)]
    return eval_report.record("gemma-jax", step, loss, base.get("loss"), samples, None)
