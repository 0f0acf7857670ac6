"""The README's memory table (trainers/gemma_jax/memory.py), one row by hand."""

from __future__ import annotations

import pytest

from trainers.gemma_jax import memory


def test_gemma3_270m_full_fine_tune_by_hand():
    total, adapters, config = memory.model_counts("gemma3-270m")
    assert total == 268_098_176  # the Gemma 3 270M's parameters
    # D=640, F=2048, 4 heads of 256, 1 KV head, 18 layers, 262,144 pieces.
    per_layer = 2 * (6 * 640 + 4 * 256 + 2 * 1 * 256 + 4 * 256 + 3 * 2048) + 4 * 4 * 256
    per_token = 18 * per_layer + 10 * 262_144
    assert per_layer == 29_184 and per_token == 3_146_752
    assert memory.activation_bytes_per_token(config, 256) == per_token
    # The README's batch 128 x 256 over a v6e-4: 32 rows per chip.
    est = memory.estimate(total, total, False, config, chips=4, fsdp=False, batch_size=128, maxlen=256)
    assert est.weights_gb == pytest.approx(18 * 268_098_176 / 1e9)  # 4.83 GB
    assert est.activations_gb == pytest.approx(32 * 256 * 3_146_752 / 1e9)  # 25.78 GB
    assert est.total_gb == pytest.approx(30.61, abs=0.01)
    # One chip would need 4 x the activations: over 32 GB, so v6e-4 is the smallest.
    one = memory.estimate(total, total, False, config, chips=1, fsdp=False, batch_size=128, maxlen=256)
    assert one.total_gb > memory.HBM_GB
    row = [line for line in memory.table(128, 256, ["gemma3-270m"]).splitlines() if line.startswith("| gemma3-270m ")]
    assert row and "| v6e-4: 30.6 GB |" in row[0]


def test_lora_and_fsdp_shrink_what_each_chip_holds():
    total, adapters, config = memory.model_counts("gemma4-e2b")
    kw = {"chips": 8, "batch_size": 128, "maxlen": 256}
    full = memory.estimate(total, total, False, config, fsdp=False, **kw)
    lora = memory.estimate(total, adapters, True, config, fsdp=False, **kw)
    sharded = memory.estimate(total, total, False, config, fsdp=True, **kw)
    assert lora.weights_gb == pytest.approx((18 * adapters + 2 * (total - adapters)) / 1e9)
    assert sharded.weights_gb == pytest.approx(full.weights_gb / 8)
    assert lora.activations_gb == full.activations_gb == sharded.activations_gb
    # Gemma 4 global layers count their 512-wide keys.
    assert memory._layer_dims(config)[4][0] == 512  # pylint: disable=protected-access
