"""Model FLOPs per token, hand-checked per family from the layer shapes.

Shapes only (jax.eval_shape): nothing is allocated. The hand numbers come
from the configs: Gemma 3 270M (18 layers, d=640, 4 heads of 256, 1 KV head,
MLP 2048, vocabulary 262144); Gemma 4 E2B (35 layers, d=1536, 8 heads, key
size 256 in sliding layers and 512 in the 7 global ones, MLP 6144 in the 15
first layers and 12288 in the 20 KV-sharing ones, 256-wide per-layer inputs).
"""

from __future__ import annotations

import pytest

import gemma_jax_helpers  # noqa: F401  (puts the repo on sys.path)
from trainers.gemma_jax import metrics
from trainers.gemma_jax import model as model_lib

MAXLEN = 256


def _flops(name: str, lora_rank: int = 0):
    m = model_lib.build_model(name, 0, "bfloat16", lora_rank)
    params = model_lib.abstract_params(m, 16)
    trainable, frozen = model_lib.split_trainable(params, lora_rank > 0)
    config = getattr(m, "model", m).config
    return metrics, params, trainable, frozen, config


def test_gemma3_270m_by_hand():
    _, params, _, _, config = _flops("gemma3-270m")
    layer = 4 * 640 * 256 + 2 * 640 * 256 + 4 * 256 * 640 + 2 * 2048 * 640 + 2048 * 640
    m = 18 * layer + 262144 * 640  # the tied embedding, once, as the output projection
    a = 18 * 4 * 4 * 256 * MAXLEN
    assert metrics.matmul_weights(params, config) == m
    assert metrics.attention_flops(config, MAXLEN) == a
    assert metrics.flops_per_token(params, params, config, MAXLEN) == 6 * m + 3 * a


def test_gemma4_e2b_by_hand_lookups_and_global_key_size():
    _, params, _, _, config = _flops("gemma4-e2b")
    local = 8 * 1536 * 256 + 2 * 1536 * 256 + 8 * 256 * 1536
    global_ = 8 * 1536 * 512 + 2 * 1536 * 512 + 8 * 512 * 1536
    mlp_first, mlp_shared = 3 * 6144 * 1536, 3 * 12288 * 1536
    per_layer_io = 1536 * 256 + 256 * 1536
    embedder = 262144 * 1536 + 1536 * 35 * 256  # output projection + per-layer projection
    m = 28 * local + 7 * global_ + 15 * mlp_first + 20 * mlp_shared + 35 * per_layer_io + embedder
    a = 4 * 8 * MAXLEN * (28 * 256 + 7 * 512)
    assert metrics.matmul_weights(params, config) == m
    assert metrics.attention_flops(config, MAXLEN) == a
    # The per-layer embedding tables (2.35B of 4.65B parameters) are not matmuls.
    total = metrics.count_params(params)
    assert 4.6e9 < total < 4.7e9 and m < 0.5 * total
    assert metrics.flops_per_token(params, params, config, MAXLEN) == 6 * m + 3 * a


def test_moe_counts_only_the_routed_experts():
    import dataclasses  # pylint: disable=g-import-not-at-top

    _, params, _, _, config = _flops("gemma4-26b-a4b")
    assert (config.num_experts, config.top_k_experts) == (128, 8)
    layers = config.num_layers
    experts = layers * 128 * (2 * 704 * 2816 + 704 * 2816)  # gating and linear of each expert
    dense = metrics.matmul_weights(params, dataclasses.replace(config, top_k_experts=128))
    routed = metrics.matmul_weights(params, config)
    assert dense - routed == experts * (1 - 8 / 128)
    assert 3e9 < routed < 4.5e9  # "A4B": about 4B active parameters per token


def test_lora_adds_weight_gradients_only_for_the_adapters():
    _, params, trainable, frozen, config = _flops("gemma3-270m", lora_rank=4)
    m_all = metrics.matmul_weights(params, config)
    m_lora = metrics.matmul_weights(trainable, config)
    a = metrics.attention_flops(config, MAXLEN)
    assert 0 < m_lora < 0.01 * m_all
    assert metrics.flops_per_token(params, trainable, config, MAXLEN) == 4 * m_all + 3 * a + 2 * m_lora
