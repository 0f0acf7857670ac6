"""Hugging Face Gemma 4 text checkpoints <-> gemma's Gemma 4 tree.

transformers 5.24's Gemma4ForCausalLM (models/gemma4/modeling_gemma4.py)
against gemma 4.0.1's gm.nn.gemma4 (L layers, P per-layer input size):

    model.embed_tokens.weight [V, D]              embedder/input_embedding
    model.embed_tokens_per_layer.weight [V, L*P]  embedder/per_layer_embeddings [V, L, P]
    model.per_layer_model_projection [L*P, D]     embedder/per_layer_model_projection/w [D, L, P]
    model.per_layer_projection_norm [P]           embedder/per_layer_projection_norm/scale
    layers.i.self_attn.{q,k,v,o}_proj             attn/{q,kv,attn_vec}_einsum/w (as Gemma 3;
                                                  global layers: their own head size and
                                                  key/value heads; k_eq_v: attn/k_einsum)
    layers.i.self_attn.{q,k}_norm [K]             attn/{query,key}_norm/scale
    layers.i.per_layer_input_gate [P, D]          per_layer_input_gate/w [D, P]
    layers.i.per_layer_projection [D, P]          per_layer_projection/w [P, D]
    layers.i.post_per_layer_input_norm            post_per_layer_input_norm/scale
    layers.i.layer_scalar [1]                     skip_scale [1]
    the four block norms, mlp, model.norm         as Gemma 3

Unlike Gemma 3, both sides store RMSNorm weights as the factor itself
(x * w: transformers' Gemma4RMSNorm, gemma's gemma4._layers.RMSNorm), so
norms copy as they are. transformers scales the per-layer projection by
1/sqrt(D) before its RMSNorm and gemma does not; the norm cancels it.
Mixture-of-experts blocks (26B-A4B) and KV-shared layers (E2B/E4B share
the keys and values of their last layers; transformers stores none for
them) are not mapped: config_problems names them.
"""

from __future__ import annotations

import numpy as np

from trainers.gemma_jax import hf

TEXT_MODEL_TYPES = ("gemma4_text",)


def _layer_shape(cfg, i: int) -> tuple[int, int]:
    """(key size, key/value heads) of layer i."""
    if cfg.attention_types[i].name == "GLOBAL" and cfg.global_key_size:
        return cfg.global_key_size, cfg.num_global_kv_heads or cfg.num_kv_heads
    return cfg.head_dim, cfg.num_kv_heads


def config_problems(hf_cfg: dict, cfg) -> list[str]:
    c = hf_cfg.get("text_config", hf_cfg)
    if c.get("model_type") not in TEXT_MODEL_TYPES:
        return [f"model_type {c.get('model_type')!r}: supported: {', '.join(TEXT_MODEL_TYPES)}"]
    problems = []
    if c.get("enable_moe_block"):
        problems.append("enable_moe_block: mixture-of-experts blocks are not mapped")
    if c.get("num_kv_shared_layers"):
        problems.append(f"num_kv_shared_layers {c['num_kv_shared_layers']}: KV-shared layers are not mapped")
    types = ["full_attention" if t.name == "GLOBAL" else "sliding_attention" for t in cfg.attention_types]
    global_dims = {
        int(i): v.get("head_dim") for i, v in (c.get("per_layer_config") or {}).items() if "head_dim" in v
    }
    wanted = {
        "vocab_size": cfg.num_embed,
        "hidden_size": cfg.embed_dim,
        "intermediate_size": cfg.hidden_dim,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_heads,
        "num_key_value_heads": cfg.num_kv_heads,
        "head_dim": cfg.head_dim,
        "sliding_window": cfg.sliding_window_size,
        "layer_types": types,
        "hidden_size_per_layer_input": cfg.per_layer_input_dim,
        "attention_k_eq_v": cfg.k_eq_v_global,
    }
    problems += [f"{k}: {c.get(k)!r}, the model has {v!r}" for k, v in wanted.items() if c.get(k) != v]
    for i, t in enumerate(types):
        if t == "full_attention" and global_dims.get(i, c.get("head_dim")) != _layer_shape(cfg, i)[0]:
            problems.append(f"per_layer_config[{i}].head_dim: {global_dims.get(i)!r}, the model has {_layer_shape(cfg, i)[0]}")
    return problems


def to_gemma(tensors: dict[str, np.ndarray], cfg, dtype) -> dict:
    t = hf._strip(tensors)  # pylint: disable=protected-access
    h, d, layers, p_dim = cfg.num_heads, cfg.embed_dim, cfg.num_layers, cfg.per_layer_input_dim

    def get(name):
        return np.asarray(t[name], np.float32)

    embedder = {"input_embedding": get("embed_tokens.weight")}
    if p_dim:
        embedder["per_layer_embeddings"] = get("embed_tokens_per_layer.weight").reshape(-1, layers, p_dim)
        embedder["per_layer_model_projection"] = {
            "w": get("per_layer_model_projection.weight").T.reshape(d, layers, p_dim)
        }
        embedder["per_layer_projection_norm"] = {"scale": get("per_layer_projection_norm.weight")}
    params = {"embedder": embedder, "final_norm": {"scale": get("norm.weight")}}
    for i in range(layers):
        p, (k, g) = f"layers.{i}.", _layer_shape(cfg, i)
        attn = {
            "q_einsum": {"w": get(p + "self_attn.q_proj.weight").reshape(h, k, d).transpose(0, 2, 1)},
            "attn_vec_einsum": {"w": get(p + "self_attn.o_proj.weight").T.reshape(h, k, d)},
            "query_norm": {"scale": get(p + "self_attn.q_norm.weight")},
            "key_norm": {"scale": get(p + "self_attn.k_norm.weight")},
        }
        key = get(p + "self_attn.k_proj.weight").reshape(g, k, d).transpose(0, 2, 1)
        if cfg.k_eq_v_global and cfg.attention_types[i].name == "GLOBAL":
            attn["k_einsum"] = {"w": key}
        else:
            value = get(p + "self_attn.v_proj.weight").reshape(g, k, d).transpose(0, 2, 1)
            attn["kv_einsum"] = {"w": np.stack([key, value])}
        layer = {
            "attn": attn,
            "mlp": {
                "gating_einsum": np.stack([get(p + "mlp.gate_proj.weight"), get(p + "mlp.up_proj.weight")]),
                "linear": get(p + "mlp.down_proj.weight").T,
            },
            "skip_scale": get(p + "layer_scalar"),
        }
        for hf_name, name in hf.NORMS.items():
            layer[name] = {"scale": get(p + hf_name + ".weight")}
        if p_dim:
            layer["per_layer_input_gate"] = {"w": get(p + "per_layer_input_gate.weight").T}
            layer["per_layer_projection"] = {"w": get(p + "per_layer_projection.weight").T}
            layer["post_per_layer_input_norm"] = {"scale": get(p + "post_per_layer_input_norm.weight")}
        params[f"layer_{i}"] = layer
    return hf._cast(params, dtype)  # pylint: disable=protected-access


def from_gemma(params: dict, cfg) -> dict[str, np.ndarray]:
    h, d, layers = cfg.num_heads, cfg.embed_dim, cfg.num_layers
    e = params["embedder"]
    out = {"model.embed_tokens.weight": e["input_embedding"], "model.norm.weight": params["final_norm"]["scale"]}
    if "per_layer_embeddings" in e:
        out["model.embed_tokens_per_layer.weight"] = e["per_layer_embeddings"].reshape(e["per_layer_embeddings"].shape[0], -1)
        out["model.per_layer_model_projection.weight"] = e["per_layer_model_projection"]["w"].reshape(d, -1).T
        out["model.per_layer_projection_norm.weight"] = e["per_layer_projection_norm"]["scale"]
    for i in range(layers):
        layer, p, (k, _) = params[f"layer_{i}"], f"model.layers.{i}.", _layer_shape(cfg, i)
        attn = layer["attn"]
        out[p + "self_attn.q_proj.weight"] = attn["q_einsum"]["w"].transpose(0, 2, 1).reshape(h * k, d)
        kv = [attn["k_einsum"]["w"]] if "k_einsum" in attn else list(attn["kv_einsum"]["w"])
        for name, w in zip("kv", kv):
            out[p + f"self_attn.{name}_proj.weight"] = w.transpose(0, 2, 1).reshape(-1, d)
        out[p + "self_attn.o_proj.weight"] = attn["attn_vec_einsum"]["w"].reshape(h * k, d).T
        out[p + "self_attn.q_norm.weight"] = attn["query_norm"]["scale"]
        out[p + "self_attn.k_norm.weight"] = attn["key_norm"]["scale"]
        out[p + "mlp.gate_proj.weight"] = layer["mlp"]["gating_einsum"][0]
        out[p + "mlp.up_proj.weight"] = layer["mlp"]["gating_einsum"][1]
        out[p + "mlp.down_proj.weight"] = layer["mlp"]["linear"].T
        out[p + "layer_scalar"] = layer["skip_scale"]
        for hf_name, name in hf.NORMS.items():
            out[p + hf_name + ".weight"] = layer[name]["scale"]
        if "per_layer_input_gate" in layer:
            out[p + "per_layer_input_gate.weight"] = layer["per_layer_input_gate"]["w"].T
            out[p + "per_layer_projection.weight"] = layer["per_layer_projection"]["w"].T
            out[p + "post_per_layer_input_norm.weight"] = layer["post_per_layer_input_norm"]["scale"]
    return {name: np.ascontiguousarray(a) for name, a in out.items()}


def hf_config(cfg, dtype: str, bos: int = 2, eos: int = 1, pad: int = 0) -> dict:
    """A transformers Gemma4TextConfig (config.json) for gemma's config."""
    types = ["full_attention" if t.name == "GLOBAL" else "sliding_attention" for t in cfg.attention_types]
    per_layer = {}
    for i, t in enumerate(types):
        if t == "full_attention":
            k, g = _layer_shape(cfg, i)
            per_layer[str(i)] = {"head_dim": k} | ({"num_key_value_heads": g} if g != cfg.num_kv_heads else {})
    return {
        "architectures": ["Gemma4ForCausalLM"],
        "model_type": "gemma4_text",
        "vocab_size": cfg.num_embed,
        "vocab_size_per_layer_input": cfg.num_embed,
        "hidden_size": cfg.embed_dim,
        "intermediate_size": cfg.hidden_dim,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_heads,
        "num_key_value_heads": cfg.num_kv_heads,
        "head_dim": cfg.head_dim,
        "per_layer_config": per_layer,
        "hidden_size_per_layer_input": cfg.per_layer_input_dim,
        "attention_k_eq_v": cfg.k_eq_v_global,
        "num_kv_shared_layers": 0,
        "enable_moe_block": False,
        "hidden_activation": "gelu_pytorch_tanh",
        "rms_norm_eps": 1e-6,
        "sliding_window": cfg.sliding_window_size,
        "layer_types": types,
        "max_position_embeddings": 131072,
        "rope_parameters": {
            "full_attention": {
                "rope_type": "proportional",
                "partial_rotary_factor": cfg.global_rope_proportion,
                "rope_theta": float(cfg.global_base_frequency),
            },
            "sliding_attention": {"rope_type": "default", "rope_theta": float(cfg.local_base_frequency)},
        },
        "final_logit_softcapping": cfg.final_logit_softcap,
        "tie_word_embeddings": True,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "pad_token_id": pad,
        "dtype": dtype,
    }
