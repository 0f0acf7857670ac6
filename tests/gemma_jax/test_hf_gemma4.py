"""Hugging Face Gemma 4 in and out (trainers/gemma_jax/hf_gemma4.py) on a
two-layer random Gemma4ForCausalLM written by transformers in the GPU
trainer's environment, shaped like `--model tiny-gemma4`."""

from __future__ import annotations

import re

import numpy as np
import pytest

import real_weights
from gemma_jax_helpers import base_args, run_train

pytestmark = pytest.mark.slow
TOLERANCE = 1e-3

# Random weights, norms and layer scalars moved away from their init so a
# swapped or untransposed tensor changes the loss.
_MAKE = """
import sys, torch
from transformers import Gemma4ForCausalLM, Gemma4TextConfig
torch.manual_seed(0)
vocab = int(sys.argv[2])
cfg = Gemma4TextConfig(vocab_size=vocab, vocab_size_per_layer_input=vocab, hidden_size=64,
    intermediate_size=128, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
    head_dim=32, global_head_dim=48, layer_types=["sliding_attention", "full_attention"],
    sliding_window=32, hidden_size_per_layer_input=8, num_kv_shared_layers=0,
    final_logit_softcapping=30.0, tie_word_embeddings=True)
m = Gemma4ForCausalLM(cfg).float().eval()
with torch.no_grad():
    for p in m.parameters():
        p.add_(0.05 * torch.randn_like(p))
    for layer in m.model.layers:
        layer.layer_scalar.fill_(0.8)
m.save_pretrained(sys.argv[1])
"""


@pytest.fixture(scope="module")
def tiny4(tmp_path_factory, tokenizer_file):
    from trainers.gemma_jax import model as model_lib  # pylint: disable=g-import-not-at-top

    d = tmp_path_factory.mktemp("hf4")
    vocab = model_lib.load_tokenizer("tiny-gemma4", tokenizer_file).vocab_size
    real_weights._run_gpu(_MAKE, str(d / "hf"), str(vocab))  # pylint: disable=protected-access
    cfg = model_lib.build_model("tiny-gemma4", vocab, "float32", 0).config
    return {"dir": d, "hf": str(d / "hf"), "cfg": cfg, "vocab": vocab}


def test_config_matches_and_the_round_trip_is_exact(tiny4):
    from trainers.gemma_jax import hf, hf_gemma4  # pylint: disable=g-import-not-at-top

    config, tensors = hf.read_dir(tiny4["hf"])
    assert hf.codec(tiny4["cfg"]) is hf_gemma4
    assert hf_gemma4.config_problems(config, tiny4["cfg"]) == []
    assert hf_gemma4.config_problems(dict(config, num_kv_shared_layers=1), tiny4["cfg"])
    back = hf_gemma4.from_gemma(hf_gemma4.to_gemma(tensors, tiny4["cfg"], np.float32), tiny4["cfg"])
    assert set(back) == set(tensors)
    assert all(np.array_equal(back[k], tensors[k]) for k in tensors)


def _args(stories_file, tokenizer_file, tiny4, ckpt, **overrides):
    kw = {
        "model": "tiny-gemma4",
        "init_from_hf": tiny4["hf"],
        "pretrained": None,
        "maxlen": 48,
        "steps": 1,
        "save_every": 1,
        "eval_batches": 1,
        "learning_rate": 1e-3,
    }
    kw.update(overrides)
    return base_args(stories_file, tokenizer_file, ckpt, tiny4["dir"] / "logs", **kw)


def test_init_from_hf_loss_matches_transformers_and_the_export_loads(
    tiny4, stories_file, tokenizer_file
):
    d = tiny4["dir"]
    inspect = run_train(
        _args(stories_file, tokenizer_file, tiny4, d / "i", inspect_batches=1, inspect_out=d / "b.npz")
    )
    assert inspect.returncode == 0, inspect.stdout + inspect.stderr
    res = run_train(_args(stories_file, tokenizer_file, tiny4, d / "ckpt", export_hf=d / "export"))
    assert res.returncode == 0, res.stdout + res.stderr
    first = float(re.search(r"\[train\] step 1 loss=([0-9.]+)", res.stdout).group(1))
    reference = real_weights.transformers_loss(tiny4["hf"], str(d / "b.npz"))
    print(f"trainer {first:.6f} transformers {reference['loss']:.6f}")
    assert abs(first - reference["loss"]) <= TOLERANCE

    from gemma_jax_helpers import load_params  # pylint: disable=g-import-not-at-top
    from trainers.gemma_jax import hf, hf_gemma4, steps  # pylint: disable=g-import-not-at-top
    from trainers.gemma_jax import model as model_lib  # pylint: disable=g-import-not-at-top

    params = load_params(str(d / "ckpt"), 1)
    config, exported = hf.read_dir(str(d / "export"))
    assert config["model_type"] == "gemma4_text"
    expected = hf_gemma4.from_gemma(params, tiny4["cfg"])
    assert set(exported) == set(expected)
    assert all(np.array_equal(exported[k], expected[k]) for k in expected)
    model = model_lib.build_model("tiny-gemma4", tiny4["vocab"], "float32", 0)
    b = np.load(d / "b.npz")
    batch = {"tokens": b["input_tokens"][0], "segment_ids": b["segment_ids"][0], "positions": b["positions"][0]}
    total, count = steps.loss_terms(model, params, batch)
    trained = float(total) / float(count)
    loaded = real_weights.transformers_loss(str(d / "export"), str(d / "b.npz"))
    print(f"after one step: trainer {trained:.6f} transformers on the export {loaded['loss']:.6f}")
    assert abs(trained - loaded["loss"]) <= TOLERANCE
    assert abs(trained - first) > 1e-6  # the step changed the weights
