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

KV-shared layers (E2B/E4B): the last num_kv_shared_layers layers attend
with the keys and values of the last unshared layer of their own type
(configuration_gemma4.py Gemma4TextConfig.kv_sharing_modes), and
transformers creates no k_proj/v_proj/k_norm for them (modeling_gemma4.py
Gemma4TextAttention.__init__, "Layers sharing kv states don't need any
weight matrices"). gemma expresses the same with
_config.create_kv_cache_sharing_patterns (frac_shared_layers: shared global
layers read layer num_unshared-1, local ones num_unshared-2) and still
declares kv_einsum/key_norm in those layers (_modules.py Attention.setup),
computing them and then replacing them by the shared cache's k/v
(Attention.__call__, "if kv_shared_cache is not None"). Those unused
tensors load as zeros (no gradient reaches them) and are not exported.
Their MLP is twice as wide when use_double_wide_mlp (Gemma4TextMLP) as
gemma's override_kv_shared_ffw_hidden (_transformer.py _get_hidden_dim).
Mixture-of-experts blocks (26B-A4B) are refused (config_problems, exit 78)
because the two route differently. gemma's router reads the MoE branch's
normed input, RMSNorm(pre_ffw_norm(x)) (_modules.py Block._forward_moe,
"moe_in = self.pre_ffw_norm(attn_output)", then _moe.py MoERagged.__call__
"self.router_norm(x)"); transformers' reads the raw residual, RMSNorm(x)
(modeling_gemma4.py Gemma4TextDecoderLayer.forward, "Take hidden states
before MLP here", then Gemma4TextRouter.forward). With w the scale both use
on the experts' input (pre_ffw_norm / pre_feedforward_layernorm_2), even
folding w into router_scale leaves gemma's router logits c(x) times
transformers', c(x) = 1/rms(RMSNorm(x) * w), a per-token factor: the same
experts win but the softmax weights differ. Folding w into the experts'
gating weights instead would match on import only: gemma's pre_ffw_norm
trains, and its round trip could not give the original tensors back.
(The rest maps 1:1: router_logits/w = router.proj.weight.T, router_scale,
per_expert_scale, gating_einsum [E, 2, H, D] = experts.gate_up_proj
[E, 2H, D] split gate/up, linear [E, H, D] = experts.down_proj [E, D, H]
transposed, mlp2 = mlp with moe_dense_hidden_dim = intermediate_size.)
"""

from __future__ import annotations

import numpy as np

from gemma.gm.nn.gemma4 import _config as gemma4_config

from trainers.gemma_jax import hf_common

TEXT_MODEL_TYPES = ("gemma4_text",)
MOE_REFUSAL = (
    "enable_moe_block: mixture-of-experts blocks are not supported: gemma routes on "
    "RMSNorm(pre_ffw_norm(x)), transformers on RMSNorm(x), so their routing weights differ "
    "by a per-token factor no weight mapping removes"
)


def kv_sources(cfg) -> list[int]:
    """The layer whose keys and values layer i attends with (i when it has
    its own): gemma's pattern, built as _transformer.py Transformer.setup does."""
    return gemma4_config.create_kv_cache_sharing_patterns(
        cfg.kv_cache_sharing_config, cfg.num_layers, cfg.attention_types
    )


def _shared(cfg) -> set[int]:
    return {i for i, source in enumerate(kv_sources(cfg)) if source != i}


def _hf_kv_sources(layer_types: list[str], num_shared: int) -> list[int | None]:
    """transformers' pattern for num_kv_shared_layers (kv_sharing_modes: the
    last num_shared layers reuse the last earlier layer of their type)."""
    first = len(layer_types) - num_shared
    out = []
    for i, kind in enumerate(layer_types):
        producers = [j for j in range(first) if layer_types[j] == kind]
        out.append(i if i < first else (producers[-1] if producers else None))
    return out


def _mlp_hidden(cfg, i: int) -> int:
    """gemma's _transformer.py Transformer._get_hidden_dim."""
    if i in _shared(cfg) and cfg.override_kv_shared_ffw_hidden is not None:
        return cfg.override_kv_shared_ffw_hidden
    return cfg.hidden_dim


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
    if c.get("enable_moe_block") or getattr(cfg, "enable_moe", False):
        problems.append(MOE_REFUSAL)
    types = hf_common.layer_types(cfg)
    wanted = {
        **hf_common.text_config_fields(cfg),
        "hidden_size_per_layer_input": cfg.per_layer_input_dim,
        "attention_k_eq_v": cfg.k_eq_v_global,
        "num_kv_shared_layers": len(_shared(cfg)),
    }
    problems += [f"{k}: {c.get(k)!r}, the model has {v!r}" for k, v in wanted.items() if (c.get(k) or 0) != (v or 0)]
    if problems:
        return problems
    return _layer_problems(c, cfg, types)


def _layer_problems(c: dict, cfg, types: list[str]) -> list[str]:
    """Per-layer key sizes, key/value heads, KV sources and MLP widths."""
    problems, shared = [], _shared(cfg)
    per_layer = {int(i): v for i, v in (c.get("per_layer_config") or {}).items()}
    hf_sources = _hf_kv_sources(types, len(shared))
    if hf_sources != kv_sources(cfg):
        problems.append(
            f"num_kv_shared_layers {len(shared)}: transformers' layers read the keys and values of layers "
            f"{hf_sources}, the model's {kv_sources(cfg)}"
        )
    for i, t in enumerate(types):
        k, g = _layer_shape(cfg, i)
        layer = per_layer.get(i, {}) if t == "full_attention" else {}
        if layer.get("head_dim", c.get("head_dim")) != k:
            problems.append(f"per_layer_config[{i}].head_dim: {layer.get('head_dim')!r}, the model has {k}")
        if layer.get("num_key_value_heads", c.get("num_key_value_heads")) != g:
            heads = layer.get("num_key_value_heads")
            problems.append(f"per_layer_config[{i}].num_key_value_heads: {heads!r}, the model has {g}")
        wide = 2 if c.get("use_double_wide_mlp") and i in shared else 1
        if c["intermediate_size"] * wide != _mlp_hidden(cfg, i):
            problems.append(
                f"use_double_wide_mlp: {c.get('use_double_wide_mlp')!r} makes layer {i}'s MLP "
                f"{c['intermediate_size'] * wide} wide, the model's is {_mlp_hidden(cfg, i)}"
            )
    return problems


def to_gemma(tensors: dict[str, np.ndarray], cfg, dtype) -> dict:
    t = hf_common.strip_prefix(tensors)  # pylint: disable=protected-access
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
    shared = _shared(cfg)
    for i in range(layers):
        p, k = f"layers.{i}.", _layer_shape(cfg, i)[0]
        attn = {
            "q_einsum": {"w": get(p + "self_attn.q_proj.weight").reshape(h, k, d).transpose(0, 2, 1)},
            "attn_vec_einsum": {"w": get(p + "self_attn.o_proj.weight").T.reshape(h, k, d)},
            "query_norm": {"scale": get(p + "self_attn.q_norm.weight")},
        }
        attn.update(_key_value(get, p, cfg, i) if i not in shared else _unused_key_value(cfg, i))
        layer = {
            "attn": attn,
            "mlp": {
                "gating_einsum": np.stack([get(p + "mlp.gate_proj.weight"), get(p + "mlp.up_proj.weight")]),
                "linear": get(p + "mlp.down_proj.weight").T,
            },
            "skip_scale": get(p + "layer_scalar"),
        }
        for hf_name, name in hf_common.NORMS.items():
            layer[name] = {"scale": get(p + hf_name + ".weight")}
        if p_dim:
            layer["per_layer_input_gate"] = {"w": get(p + "per_layer_input_gate.weight").T}
            layer["per_layer_projection"] = {"w": get(p + "per_layer_projection.weight").T}
            layer["post_per_layer_input_norm"] = {"scale": get(p + "post_per_layer_input_norm.weight")}
        params[f"layer_{i}"] = layer
    return hf_common.cast(params, dtype)  # pylint: disable=protected-access


def _k_eq_v(cfg, i: int) -> bool:
    return cfg.k_eq_v_global and cfg.attention_types[i].name == "GLOBAL"


def _key_value(get, p: str, cfg, i: int) -> dict:
    (k, g), d = _layer_shape(cfg, i), cfg.embed_dim
    key = get(p + "self_attn.k_proj.weight").reshape(g, k, d).transpose(0, 2, 1)
    out = {"key_norm": {"scale": get(p + "self_attn.k_norm.weight")}}
    if _k_eq_v(cfg, i):  # transformers: v_proj None, values = keys (use_alternative_attention)
        return out | {"k_einsum": {"w": key}}
    value = get(p + "self_attn.v_proj.weight").reshape(g, k, d).transpose(0, 2, 1)
    return out | {"kv_einsum": {"w": np.stack([key, value])}}


def _unused_key_value(cfg, i: int) -> dict:
    """Zeros for the key/value tensors gemma declares in a KV-shared layer
    but replaces by the shared layer's keys and values."""
    (k, g), d = _layer_shape(cfg, i), cfg.embed_dim
    out = {"key_norm": {"scale": np.zeros((k,), np.float32)}}
    if _k_eq_v(cfg, i):
        return out | {"k_einsum": {"w": np.zeros((g, d, k), np.float32)}}
    return out | {"kv_einsum": {"w": np.zeros((2, g, d, k), np.float32)}}


def from_gemma(params: dict, cfg) -> dict[str, np.ndarray]:
    h, d, layers = cfg.num_heads, cfg.embed_dim, cfg.num_layers
    e = params["embedder"]
    out = {"model.embed_tokens.weight": e["input_embedding"], "model.norm.weight": params["final_norm"]["scale"]}
    if "per_layer_embeddings" in e:
        out["model.embed_tokens_per_layer.weight"] = e["per_layer_embeddings"].reshape(e["per_layer_embeddings"].shape[0], -1)
        out["model.per_layer_model_projection.weight"] = e["per_layer_model_projection"]["w"].reshape(d, -1).T
        out["model.per_layer_projection_norm.weight"] = e["per_layer_projection_norm"]["scale"]
    shared = _shared(cfg)
    for i in range(layers):
        layer, p, (k, _) = params[f"layer_{i}"], f"model.layers.{i}.", _layer_shape(cfg, i)
        attn = layer["attn"]
        out[p + "self_attn.q_proj.weight"] = attn["q_einsum"]["w"].transpose(0, 2, 1).reshape(h * k, d)
        out[p + "self_attn.o_proj.weight"] = attn["attn_vec_einsum"]["w"].reshape(h * k, d).T
        out[p + "self_attn.q_norm.weight"] = attn["query_norm"]["scale"]
        if i not in shared:  # transformers has no k/v weights there
            kv = [attn["k_einsum"]["w"]] if "k_einsum" in attn else list(attn["kv_einsum"]["w"])
            for name, w in zip("kv", kv):
                out[p + f"self_attn.{name}_proj.weight"] = w.transpose(0, 2, 1).reshape(-1, d)
            out[p + "self_attn.k_norm.weight"] = attn["key_norm"]["scale"]
        out[p + "mlp.gate_proj.weight"] = layer["mlp"]["gating_einsum"][0]
        out[p + "mlp.up_proj.weight"] = layer["mlp"]["gating_einsum"][1]
        out[p + "mlp.down_proj.weight"] = layer["mlp"]["linear"].T
        out[p + "layer_scalar"] = layer["skip_scale"]
        for hf_name, name in hf_common.NORMS.items():
            out[p + hf_name + ".weight"] = layer[name]["scale"]
        if "per_layer_input_gate" in layer:
            out[p + "per_layer_input_gate.weight"] = layer["per_layer_input_gate"]["w"].T
            out[p + "per_layer_projection.weight"] = layer["per_layer_projection"]["w"].T
            out[p + "post_per_layer_input_norm.weight"] = layer["post_per_layer_input_norm"]["scale"]
    return {name: np.ascontiguousarray(a) for name, a in out.items()}


def hf_config(cfg, dtype: str, bos: int = 2, eos: int = 1, pad: int = 0) -> dict:
    """A transformers Gemma4TextConfig (config.json) for gemma's config;
    config_problems(hf_config(cfg), cfg) lists what it cannot express."""
    types = hf_common.layer_types(cfg)
    per_layer = {}
    for i, t in enumerate(types):
        if t == "full_attention":
            k, g = _layer_shape(cfg, i)
            per_layer[str(i)] = {"head_dim": k} | ({"num_key_value_heads": g} if g != cfg.num_kv_heads else {})
    return {
        "architectures": ["Gemma4ForCausalLM"],
        "model_type": "gemma4_text",
        **hf_common.text_config_fields(cfg),
        "vocab_size_per_layer_input": cfg.num_embed,
        "per_layer_config": per_layer,
        "hidden_size_per_layer_input": cfg.per_layer_input_dim,
        "attention_k_eq_v": cfg.k_eq_v_global,
        "num_kv_shared_layers": len(_shared(cfg)),
        "use_double_wide_mlp": cfg.override_kv_shared_ffw_hidden == 2 * cfg.hidden_dim,
        "enable_moe_block": False,
        "hidden_activation": "gelu_pytorch_tanh",
        "rms_norm_eps": 1e-6,
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
