"""Hugging Face Gemma 3 text checkpoints <-> gemma's parameter tree
(Gemma 4: hf_gemma4.py, chosen by `codec`).

A Hugging Face directory holds config.json and *.safetensors, read and
written by hf_common.py, which both families' codecs share.

Names and layouts (transformers' Gemma3ForCausalLM vs gemma's Gemma3 tree):

    model.embed_tokens.weight [V, D]          embedder/input_embedding [V, D]
    layers.i.self_attn.q_proj [H*K, D]        layer_i/attn/q_einsum/w [H, D, K]
    layers.i.self_attn.{k,v}_proj [G*K, D]    layer_i/attn/kv_einsum/w [2, G, D, K]
    layers.i.self_attn.o_proj [D, H*K]        layer_i/attn/attn_vec_einsum/w [H, K, D]
    layers.i.self_attn.{q,k}_norm [K]         layer_i/attn/_{query,key}_norm/scale
    layers.i.mlp.{gate,up}_proj [F, D]        layer_i/mlp/gating_einsum [2, F, D]
    layers.i.mlp.down_proj [D, F]             layer_i/mlp/linear [F, D]
    layers.i.{input,post_attention,pre_feedforward,post_feedforward}_layernorm
                                              layer_i/{pre_attention,post_attention,pre_ffw,post_ffw}_norm/scale
    model.norm.weight                         final_norm/scale

Both sides store RMSNorm weights as the offset from 1 (x * (1 + w)) and tie
the output projection to the embedding, so norms and the embedding copy as
they are.
"""

from __future__ import annotations

import sys

import numpy as np

from trainers.gemma_jax import hf_gemma4
# Re-exported: the trainer, the export and the tests read and write through this module.
from trainers.gemma_jax.hf_common import (  # noqa: F401
    NORMS,
    cast,
    layer_types,
    read_dir,
    read_safetensors,
    strip_prefix,
    text_config_fields,
    write_safetensors,
)

TEXT_MODEL_TYPES = ("gemma3_text",)


def codec(cfg):
    """This module for gemma's Gemma 3 configs, hf_gemma4 for Gemma 4's:
    both expose config_problems, to_gemma, from_gemma and hf_config."""
    if type(cfg).__module__.startswith("gemma.gm.nn.gemma4"):
        return hf_gemma4
    return sys.modules[__name__]


def config_problems(hf: dict, cfg) -> list[str]:
    """Where a Hugging Face config.json differs from gemma's TransformerConfig."""
    hf = hf.get("text_config", hf)
    if hf.get("model_type") not in TEXT_MODEL_TYPES:
        return [f"model_type {hf.get('model_type')!r}: supported: {', '.join(TEXT_MODEL_TYPES)}"]
    wanted = text_config_fields(cfg)
    return [f"{k}: {hf.get(k)!r}, the model has {v!r}" for k, v in wanted.items() if hf.get(k) != v]


def to_gemma(tensors: dict[str, np.ndarray], cfg, dtype) -> dict:
    """gemma's nested params from transformers' tensors, cast to `dtype`."""
    t = strip_prefix(tensors)
    h, g, k, d = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.embed_dim

    def get(name):
        return np.asarray(t[name], np.float32)

    params = {"embedder": {"input_embedding": get("embed_tokens.weight")}}
    params["final_norm"] = {"scale": get("norm.weight")}
    for i in range(cfg.num_layers):
        p = f"layers.{i}."
        kv = [get(p + f"self_attn.{n}_proj.weight").reshape(g, k, d).transpose(0, 2, 1) for n in "kv"]
        layer = {
            "attn": {
                "q_einsum": {"w": get(p + "self_attn.q_proj.weight").reshape(h, k, d).transpose(0, 2, 1)},
                "kv_einsum": {"w": np.stack(kv)},
                "attn_vec_einsum": {"w": get(p + "self_attn.o_proj.weight").T.reshape(h, k, d)},
                "_query_norm": {"scale": get(p + "self_attn.q_norm.weight")},
                "_key_norm": {"scale": get(p + "self_attn.k_norm.weight")},
            },
            "mlp": {
                "gating_einsum": np.stack([get(p + "mlp.gate_proj.weight"), get(p + "mlp.up_proj.weight")]),
                "linear": get(p + "mlp.down_proj.weight").T,
            },
        }
        for hf_name, name in NORMS.items():
            layer[name] = {"scale": get(p + hf_name + ".weight")}
        params[f"layer_{i}"] = layer
    return cast(params, dtype)


def from_gemma(params: dict, cfg) -> dict[str, np.ndarray]:
    """transformers' tensors (Gemma3ForCausalLM names) from gemma's params."""
    h, k, d = cfg.num_heads, cfg.head_dim, cfg.embed_dim
    out = {"model.embed_tokens.weight": params["embedder"]["input_embedding"]}
    out["model.norm.weight"] = params["final_norm"]["scale"]
    for i in range(cfg.num_layers):
        layer, p = params[f"layer_{i}"], f"model.layers.{i}."
        attn, mlp = layer["attn"], layer["mlp"]
        out[p + "self_attn.q_proj.weight"] = attn["q_einsum"]["w"].transpose(0, 2, 1).reshape(h * k, d)
        for j, n in enumerate("kv"):
            w = attn["kv_einsum"]["w"][j]
            out[p + f"self_attn.{n}_proj.weight"] = w.transpose(0, 2, 1).reshape(-1, d)
        out[p + "self_attn.o_proj.weight"] = attn["attn_vec_einsum"]["w"].reshape(h * k, d).T
        out[p + "self_attn.q_norm.weight"] = attn["_query_norm"]["scale"]
        out[p + "self_attn.k_norm.weight"] = attn["_key_norm"]["scale"]
        out[p + "mlp.gate_proj.weight"] = mlp["gating_einsum"][0]
        out[p + "mlp.up_proj.weight"] = mlp["gating_einsum"][1]
        out[p + "mlp.down_proj.weight"] = mlp["linear"].T
        for hf_name, name in NORMS.items():
            out[p + hf_name + ".weight"] = layer[name]["scale"]
    return {name: np.ascontiguousarray(a) for name, a in out.items()}


def hf_config(cfg, dtype: str, bos: int = 2, eos: int = 1, pad: int = 0) -> dict:
    """A transformers Gemma3TextConfig (config.json) for gemma's config."""
    return {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        **text_config_fields(cfg),
        "query_pre_attn_scalar": cfg.head_dim,
        "hidden_activation": "gelu_pytorch_tanh",
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 32768,
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": float(cfg.global_base_frequency)},
            "sliding_attention": {"rope_type": "default", "rope_theta": float(cfg.local_base_frequency)},
        },
        "final_logit_softcapping": cfg.final_logit_softcap,
        "attn_logit_softcapping": cfg.attn_logits_soft_cap,
        "tie_word_embeddings": True,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "pad_token_id": pad,
        "dtype": dtype,
    }
