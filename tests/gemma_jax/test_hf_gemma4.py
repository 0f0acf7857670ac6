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
# swapped or untransposed tensor changes the loss. Every model of this file is
# written by one process (torch and transformers imported once): argv[1] is a
# JSON list of [directory, Gemma4TextConfig keywords]; then the MoE model's
# router runs on the inputs of argv[3] (_ROUTE) when argv[2] names its directory.
_MAKE = """
import json, sys, torch
from transformers import Gemma4ForCausalLM, Gemma4TextConfig
for out, kwargs in json.loads(sys.argv[1]):
    torch.manual_seed(0)
    m = Gemma4ForCausalLM(Gemma4TextConfig(**kwargs)).float().eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.05 * torch.randn_like(p))
        for layer in m.model.layers:
            layer.layer_scalar.fill_(0.8)
    m.save_pretrained(out)
"""


def _tiny4_kwargs(vocab: int) -> dict:
    """transformers' twin of `--model tiny-gemma4`."""
    return {
        "vocab_size": vocab, "vocab_size_per_layer_input": vocab, "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
        "num_key_value_heads": 1, "head_dim": 32, "global_head_dim": 48,
        "layer_types": ["sliding_attention", "full_attention"], "sliding_window": 32,
        "hidden_size_per_layer_input": 8, "num_kv_shared_layers": 0,
        "final_logit_softcapping": 30.0, "tie_word_embeddings": True,
    }


@pytest.fixture(scope="module")
def made(tmp_path_factory, tokenizer_file):
    """Every transformers model of this file, written by one process: tiny4, each variant, the MoE
    model and its routing of fixed inputs."""
    import json  # pylint: disable=g-import-not-at-top

    from trainers.gemma_jax import model as model_lib  # pylint: disable=g-import-not-at-top

    vocab = model_lib.load_tokenizer("tiny-gemma4", tokenizer_file).vocab_size
    dirs = {name: tmp_path_factory.mktemp(f"hf4_{name}") for name in ["tiny4", "moe", *sorted(VARIANTS)]}
    kwargs = {"tiny4": _tiny4_kwargs(vocab), "moe": _MOE} | {n: v[0] for n, v in VARIANTS.items()}
    x = 3 * np.random.default_rng(0).standard_normal((16, 64)).astype(np.float32)
    np.savez(dirs["moe"] / "route.npz", x=x)
    models = [[str(dirs[n] / "hf"), kwargs[n]] for n in dirs]
    real_weights._run_gpu(  # pylint: disable=protected-access
        _MAKE + _ROUTE, json.dumps(models), str(dirs["moe"] / "hf"), str(dirs["moe"] / "route.npz")
    )
    return {"dirs": dirs, "vocab": vocab}


@pytest.fixture(scope="module")
def tiny4(made):
    from trainers.gemma_jax import model as model_lib  # pylint: disable=g-import-not-at-top

    d, vocab = made["dirs"]["tiny4"], made["vocab"]
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
    reference, loaded = real_weights.transformers_losses(
        [(tiny4["hf"], str(d / "b.npz")), (str(d / "export"), str(d / "b.npz"))]
    )
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
    print(f"after one step: trainer {trained:.6f} transformers on the export {loaded['loss']:.6f}")
    assert abs(trained - loaded["loss"]) <= TOLERANCE
    assert abs(trained - first) > 1e-6  # the step changed the weights


# Gemma 4 variants the trainer's tiny model lacks, checked in process (the
# same codec --init_from_hf and --export_hf use, model.load_hf included):
# E2B's KV-shared last layers with their double-wide MLP, and 31B's global
# layers whose values are their keys, with fewer key/value heads.
_VOCAB = 256
_COMMON = {
    "vocab_size": _VOCAB, "vocab_size_per_layer_input": _VOCAB, "hidden_size": 64,
    "intermediate_size": 128, "num_attention_heads": 2, "head_dim": 32, "global_head_dim": 48,
    "sliding_window": 16, "final_logit_softcapping": 30.0, "tie_word_embeddings": True,
}
VARIANTS = {
    "kv_shared": (
        _COMMON | {
            "num_hidden_layers": 4, "num_key_value_heads": 1, "hidden_size_per_layer_input": 8,
            "layer_types": ["sliding_attention", "full_attention"] * 2,
            "num_kv_shared_layers": 2, "use_double_wide_mlp": True,
        },
        {"num_layers": 4, "kv_shared": 0.5, "override_kv_shared_ffw_hidden": 256},
    ),
    "k_eq_v": (
        _COMMON | {
            "num_hidden_layers": 2, "num_key_value_heads": 2, "hidden_size_per_layer_input": 0,
            "layer_types": ["sliding_attention", "full_attention"],
            "attention_k_eq_v": True, "num_global_key_value_heads": 1,
        },
        {"num_layers": 2, "k_eq_v_global": True, "num_kv_heads": 2, "num_global_kv_heads": 1, "per_layer_input_dim": 0},
    ),
}


def _variant_config(overrides: dict):
    import dataclasses  # pylint: disable=g-import-not-at-top

    from gemma.gm.nn.gemma4 import _config, _modules  # pylint: disable=g-import-not-at-top
    from trainers.gemma_jax import model as model_lib  # pylint: disable=g-import-not-at-top

    o = dict(overrides)
    local, global_ = _modules.AttentionType.LOCAL_SLIDING, _modules.AttentionType.GLOBAL
    o["attention_types"] = (local, global_) * (o.pop("num_layers") // 2)
    if "kv_shared" in o:  # as _gemma4.py _gemma4_config builds E2B/E4B's
        frac = o.pop("kv_shared")
        o["kv_cache_sharing_config"] = _config.KVCacheSharingConfig(frac, share_global=True, share_local=True)
    return dataclasses.replace(model_lib.tiny_gemma4_config(_VOCAB), sliding_window_size=16, **o)


def _batch(path) -> dict:
    """Two rows of 48 tokens, longer than the sliding window: three segments."""
    rng = np.random.default_rng(0)
    tokens = rng.integers(3, _VOCAB, (1, 2, 48)).astype(np.int32)
    seg = np.array([[[1] * 30 + [2] * 18, [1] * 48]], np.int32)
    positions = np.array([[list(range(30)) + list(range(18)), list(range(48))]], np.int32)
    np.savez(path, input_tokens=tokens, segment_ids=seg, positions=positions, loss_weights=(seg > 0).astype(np.float32))
    return {"tokens": tokens[0], "segment_ids": seg[0], "positions": positions[0]}


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def variant(request, made):
    d = made["dirs"][request.param]
    return {"name": request.param, "dir": d, "hf": str(d / "hf"), "cfg": _variant_config(VARIANTS[request.param][1])}


def test_variant_config_and_exact_round_trip(variant):
    from trainers.gemma_jax import hf, hf_gemma4  # pylint: disable=g-import-not-at-top
    from trainers.gemma_jax import model as model_lib  # pylint: disable=g-import-not-at-top

    cfg = variant["cfg"]
    config, tensors = hf.read_dir(variant["hf"])
    assert hf_gemma4.config_problems(config, cfg) == []
    assert hf_gemma4.config_problems(hf_gemma4.hf_config(cfg, "float32"), cfg) == []
    # the trainer's tiny-gemma4 (no sharing, separate values) refuses it
    plain = model_lib.tiny_gemma4_config(_VOCAB)
    wrong = "num_kv_shared_layers" if variant["name"] == "kv_shared" else "attention_k_eq_v"
    assert any(p.startswith(wrong) for p in hf_gemma4.config_problems(config, plain))
    if variant["name"] == "kv_shared":
        assert hf_gemma4.kv_sources(cfg) == [0, 1, 0, 1]
        assert "model.layers.2.self_attn.k_proj.weight" not in tensors  # transformers stores none
        assert hf_gemma4.config_problems(dict(config, use_double_wide_mlp=False), cfg)
    else:
        assert "model.layers.1.self_attn.v_proj.weight" not in tensors
        assert "model.layers.0.self_attn.v_proj.weight" in tensors
    back = hf_gemma4.from_gemma(hf_gemma4.to_gemma(tensors, cfg, np.float32), cfg)
    assert set(back) == set(tensors)
    assert all(np.array_equal(back[k], tensors[k]) for k in tensors)


def test_variant_loss_matches_transformers_and_the_export_loads(variant):
    import jax  # pylint: disable=g-import-not-at-top
    import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
    from gemma import gm  # pylint: disable=g-import-not-at-top
    from trainers.gemma_jax import hf, hf_gemma4, steps  # pylint: disable=g-import-not-at-top
    from trainers.gemma_jax import model as model_lib  # pylint: disable=g-import-not-at-top

    d, cfg = variant["dir"], variant["cfg"]
    batch = _batch(d / "b.npz")
    model = gm.nn.Gemma4_E2B(config=cfg, text_only=True, dtype=jnp.float32)
    abstract = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), batch["tokens"])["params"])
    one = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    params = model_lib.load_hf(variant["hf"], model, abstract, jax.tree.map(lambda _: one, abstract))

    def loss(p):
        total, count = steps.loss_terms(model, p, batch)
        return total / count

    first, grads = jax.value_and_grad(loss)(params)
    if variant["name"] == "kv_shared":  # the zeros gemma declares there stay out of the loss
        assert not np.any(np.asarray(grads["layer_2"]["attn"]["kv_einsum"]["w"]))
        assert np.any(np.asarray(grads["layer_0"]["attn"]["kv_einsum"]["w"]))

    stepped = jax.tree.map(lambda p, g: p - 0.5 * g, params, grads)
    trained = float(loss(stepped))
    out = d / "export"
    out.mkdir()
    hf.write_safetensors(str(out / "model.safetensors"), hf_gemma4.from_gemma(jax.tree.map(np.asarray, stepped), cfg))
    (out / "config.json").write_text(__import__("json").dumps(hf_gemma4.hf_config(cfg, "float32")))
    reference, loaded = real_weights.transformers_losses(
        [(variant["hf"], str(d / "b.npz")), (str(out), str(d / "b.npz"))]
    )
    print(f"{variant['name']}: gemma {float(first):.6f} transformers {reference['loss']:.6f}")
    assert abs(float(first) - reference["loss"]) <= TOLERANCE
    print(f"{variant['name']} after one step: gemma {trained:.6f} transformers on the export {loaded['loss']:.6f}")
    assert abs(trained - loaded["loss"]) <= TOLERANCE
    assert abs(trained - float(first)) > 1e-4  # the step changed the weights


# 26B-A4B's mixture-of-experts blocks stay refused: the two libraries route
# differently (hf_gemma4.py's docstring). These pin that difference on a tiny
# MoE model so a library change that removes it turns them red.
_MOE = _COMMON | {
    "num_hidden_layers": 2, "num_key_value_heads": 1, "hidden_size_per_layer_input": 0,
    "layer_types": ["sliding_attention", "full_attention"],
    "enable_moe_block": True, "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 32,
}
# Run after _MAKE in its process (its imports; argv[2] and argv[3]).
_ROUTE = """
import numpy as np
m = Gemma4ForCausalLM.from_pretrained(sys.argv[2]).float().eval()
x = torch.from_numpy(np.load(sys.argv[3])["x"])
with torch.no_grad():
    _, weights, experts = m.model.layers[0].router(x)
np.savez(sys.argv[3], x=x.numpy(), weights=weights.numpy(), experts=experts.numpy())
"""


@pytest.fixture(scope="module")
def tiny_moe(made):
    d = made["dirs"]["moe"]
    return {"hf": str(d / "hf"), "route": dict(np.load(d / "route.npz"))}


def test_moe_checkpoints_and_models_are_refused(tiny_moe):
    from trainers.gemma_jax import hf, hf_gemma4  # pylint: disable=g-import-not-at-top

    config, tensors = hf.read_dir(tiny_moe["hf"])
    assert "model.layers.0.router.proj.weight" in tensors
    assert hf_gemma4.MOE_REFUSAL in hf_gemma4.config_problems(config, _variant_config({"num_layers": 2}))
    moe = _variant_config(
        {"num_layers": 2, "enable_moe": True, "num_experts": 4, "expert_dim": 32, "top_k_experts": 2,
         "moe_dense_hidden_dim": 128, "per_layer_input_dim": 0}
    )
    assert hf_gemma4.MOE_REFUSAL in hf_gemma4.config_problems(hf_gemma4.hf_config(moe, "float32"), moe)


def _gemma_routing(t: dict, x: np.ndarray, router_scale: np.ndarray):
    """gemma's MoE routing of layer 0 (Block._forward_moe's pre_ffw_norm, then
    MoERagged's router) on transformers' router tensors: per token, the chosen
    experts and their weights times per_expert_scale, sorted by expert."""
    import jax  # pylint: disable=g-import-not-at-top
    import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
    from gemma.gm.nn.gemma4 import _layers, _moe  # pylint: disable=g-import-not-at-top

    p = "model.layers.0."
    experts, scale = t[p + "router.per_expert_scale"].size, t[p + "router.per_expert_scale"]
    moe = _moe.MoERagged(features=x.shape[-1], hidden_dim=32, num_experts=experts, num_experts_per_datapoint=2)
    params = {"router_logits": {"w": t[p + "router.proj.weight"].T}, "router_scale": router_scale,
              "per_expert_scale": scale}

    def route(m, h):
        h = _layers.RMSNorm().apply({"params": {"scale": t[p + "pre_feedforward_layernorm_2.weight"]}}, h)
        h = m.router_norm(h) * jax.lax.rsqrt(jnp.float32(h.shape[-1])) * m.router_scale
        return m._router(m.router_logits("gsd,de->gse", h))  # pylint: disable=protected-access

    weights, chosen = moe.apply({"params": params}, jnp.asarray(x)[None], method=route)
    chosen = np.sort(np.asarray(chosen[0]), -1)
    return chosen, np.take_along_axis(np.asarray(weights[0]), chosen, -1) * scale[chosen]


def test_moe_routing_differs_by_a_per_token_factor(tiny_moe):
    from trainers.gemma_jax import hf  # pylint: disable=g-import-not-at-top

    _, t = hf.read_dir(tiny_moe["hf"])
    r, p = tiny_moe["route"], "model.layers.0."
    order = np.argsort(r["experts"], -1)
    hf_experts, hf_weights = np.take_along_axis(r["experts"], order, -1), np.take_along_axis(r["weights"], order, -1)
    w = t[p + "pre_feedforward_layernorm_2.weight"]
    # the best a weight mapping can do: fold w out of the router's scale
    chosen, weights = _gemma_routing(t, r["x"], t[p + "router.scale"] / w)
    assert np.array_equal(chosen, hf_experts)  # the same experts win...
    assert np.abs(weights - hf_weights).max() > 1e-5  # ...with other weights
    # exactly transformers' routing with its logits times c(x) = 1/rms(RMSNorm(x) * w)
    xn = r["x"] / np.sqrt(np.mean(r["x"] ** 2, -1, keepdims=True) + 1e-6)
    c = 1 / np.sqrt(np.mean((xn * w) ** 2, -1, keepdims=True))
    logits = (xn * t[p + "router.scale"] / np.sqrt(xn.shape[-1])) @ t[p + "router.proj.weight"].T * c
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    top = np.take_along_axis(probs, hf_experts, -1)
    scaled = top / top.sum(-1, keepdims=True) * t[p + "router.per_expert_scale"][hf_experts]
    assert np.abs(weights - scaled).max() <= 1e-5
