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
    # The README's batch 128 x 256 over a v6e-4: 32 rows per chip, the count
    # scaled by the compiler's calibration.
    est = memory.estimate(total, total, False, config, chips=4, fsdp=1, batch_size=128, maxlen=256)
    assert est.weights_gib == pytest.approx(18 * 268_098_176 / 2**30)  # 4.49 GiB
    assert est.activations_gib == pytest.approx(0.54 * 32 * 256 * 3_146_752 / 2**30)  # 12.96 GiB
    assert est.total_gib == pytest.approx(17.46, abs=0.01)
    # One chip would need 4 x the activations: over its HBM, so v6e-4 is the smallest.
    one = memory.estimate(total, total, False, config, chips=1, fsdp=1, batch_size=128, maxlen=256)
    assert one.total_gib > memory.HBM_GIB
    row = [line for line in memory.table(128, 256, ["gemma3-270m"]).splitlines() if line.startswith("| gemma3-270m ")]
    assert row and "| v6e-4: 17.5 GiB |" in row[0]


def test_a_run_s_own_flags_give_its_estimate():
    args = ["--data_path", "/d", "--checkpoint_dir", "/c", "--maxlen", "256", "--batch_size", "64"]
    total, _, config = memory.model_counts("gemma3-270m")
    direct = memory.estimate(total, total, False, config, chips=8, fsdp=1, batch_size=64, maxlen=256)
    assert memory.estimate_run(args, 8) == direct
    sharded = memory.estimate_run([*args, "--fsdp"], 16, slices=2)  # bare flag: a whole slice
    assert sharded.weights_gib == pytest.approx(direct.weights_gib / 8)


def test_lora_and_fsdp_shrink_what_each_chip_holds():
    total, adapters, config = memory.model_counts("gemma4-e2b")
    kw = {"chips": 8, "batch_size": 128, "maxlen": 256}
    full = memory.estimate(total, total, False, config, fsdp=1, **kw)
    lora = memory.estimate(total, adapters, True, config, fsdp=1, **kw)
    sharded = memory.estimate(total, total, False, config, fsdp=8, **kw)
    assert lora.weights_gib == pytest.approx((18 * adapters + 2 * (total - adapters)) / 2**30)
    assert sharded.weights_gib == pytest.approx(full.weights_gib / 8)
    assert lora.activations_gib == full.activations_gib == sharded.activations_gib
    # Gemma 4 global layers count their 512-wide keys.
    assert memory._layer_dims(config)[4][0] == 512  # pylint: disable=protected-access


def test_the_shapes_table_is_what_gemma_s_own_configs_give():
    """model_shapes.json, which the platform estimates runs with (no jax there), is gemma's models today."""
    import json  # pylint: disable=g-import-not-at-top

    recorded = json.loads(memory.SHAPES.read_text())["models"]
    assert recorded == json.loads(json.dumps(memory.real_shapes())), "regenerate: python -m trainers.gemma_jax.memory --write-shapes"
    total, adapters, config = memory.model_counts("gemma4-e2b")
    shape = memory.shapes()["gemma4-e2b"]
    assert (shape.params, shape.lora16_params, shape.adapters(32)) == (total, adapters, 2 * adapters)
    assert memory.activation_bytes_per_token(shape, 256) == memory.activation_bytes_per_token(config, 256)
