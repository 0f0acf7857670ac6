"""Hugging Face Gemma 3 text checkpoints <-> gemma's parameter tree
(Gemma 4: hf_gemma4.py, chosen by `codec`).

A Hugging Face directory holds config.json and *.safetensors. The
safetensors format (https://huggingface.co/docs/safetensors) is an 8-byte
little-endian header size, a JSON header {name: {dtype, shape,
data_offsets}}, then the raw little-endian arrays; it is read and written
here with numpy (bfloat16 through ml_dtypes, a jax dependency).

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

import json
import os
import struct
import sys

import ml_dtypes
import numpy as np

_DTYPES = {
    "F32": np.dtype(np.float32),
    "F16": np.dtype(np.float16),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "I64": np.dtype(np.int64),
    "I32": np.dtype(np.int32),
}
_NAMES = {v: k for k, v in _DTYPES.items()}
NORMS = {
    "input_layernorm": "pre_attention_norm",
    "post_attention_layernorm": "post_attention_norm",
    "pre_feedforward_layernorm": "pre_ffw_norm",
    "post_feedforward_layernorm": "post_ffw_norm",
}
TEXT_MODEL_TYPES = ("gemma3_text",)


def codec(cfg):
    """This module for gemma's Gemma 3 configs, hf_gemma4 for Gemma 4's:
    both expose config_problems, to_gemma, from_gemma and hf_config."""
    if type(cfg).__module__.startswith("gemma.gm.nn.gemma4"):
        from trainers.gemma_jax import hf_gemma4  # pylint: disable=g-import-not-at-top

        return hf_gemma4
    return sys.modules[__name__]


def read_safetensors(path: str) -> dict[str, np.ndarray]:
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
        base = 8 + size
        out = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            begin, end = info["data_offsets"]
            f.seek(base + begin)
            raw = f.read(end - begin)
            out[name] = np.frombuffer(raw, _DTYPES[info["dtype"]]).reshape(info["shape"])
    return out


def write_safetensors(path: str, tensors: dict[str, np.ndarray]) -> None:
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    arrays = {k: np.ascontiguousarray(v) for k, v in sorted(tensors.items())}
    for name, a in arrays.items():
        header[name] = {
            "dtype": _NAMES[a.dtype],
            "shape": list(a.shape),
            "data_offsets": [offset, offset + a.nbytes],
        }
        offset += a.nbytes
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob)
        for a in arrays.values():
            f.write(a.tobytes())


def read_dir(directory: str) -> tuple[dict, dict[str, np.ndarray]]:
    """(config.json, every tensor of every *.safetensors file)."""
    with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    tensors = {}
    for name in sorted(os.listdir(directory)):
        if name.endswith(".safetensors"):
            tensors.update(read_safetensors(os.path.join(directory, name)))
    return config, tensors


def layer_types(cfg) -> list[str]:
    """transformers' name of each layer's attention type."""
    return ["full_attention" if t.name == "GLOBAL" else "sliding_attention" for t in cfg.attention_types]


def text_config_fields(cfg) -> dict:
    """The config.json fields Gemma 3 and Gemma 4 text configs share, from gemma's TransformerConfig."""
    return {
        "vocab_size": cfg.num_embed,
        "hidden_size": cfg.embed_dim,
        "intermediate_size": cfg.hidden_dim,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_heads,
        "num_key_value_heads": cfg.num_kv_heads,
        "head_dim": cfg.head_dim,
        "sliding_window": cfg.sliding_window_size,
        "layer_types": layer_types(cfg),
    }


def config_problems(hf: dict, cfg) -> list[str]:
    """Where a Hugging Face config.json differs from gemma's TransformerConfig."""
    hf = hf.get("text_config", hf)
    if hf.get("model_type") not in TEXT_MODEL_TYPES:
        return [f"model_type {hf.get('model_type')!r}: supported: {', '.join(TEXT_MODEL_TYPES)}"]
    wanted = text_config_fields(cfg)
    return [f"{k}: {hf.get(k)!r}, the model has {v!r}" for k, v in wanted.items() if hf.get(k) != v]


def _strip(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Names without the 'model.' (or 'model.language_model.') prefix."""
    out = {}
    for name, a in tensors.items():
        for prefix in ("model.language_model.", "model."):
            if name.startswith(prefix):
                name = name[len(prefix) :]
                break
        out[name] = a
    return out


def to_gemma(tensors: dict[str, np.ndarray], cfg, dtype) -> dict:
    """gemma's nested params from transformers' tensors, cast to `dtype`."""
    t = _strip(tensors)
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
    return _cast(params, dtype)


def _cast(tree, dtype):
    if isinstance(tree, dict):
        return {key: _cast(v, dtype) for key, v in tree.items()}
    return np.asarray(tree).astype(dtype)


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
