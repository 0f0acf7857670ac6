"""Loading gemma checkpoints into fsdp shardings (trainers/gemma_jax/pretrained.py).

pretrained_check.py runs once, on 4 host devices: a tiny Gemma 3 saved in
each of gemma's layouts, loaded into the trainer's fsdp shardings by the
trainer's loader and by gemma's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gemma_jax_helpers import REPO, cpu_env

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pretrained_check.py")


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    res = subprocess.run(
        [sys.executable, CHECK, str(tmp_path_factory.mktemp("layouts"))],
        cwd=REPO,
        env=cpu_env(4),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def _assert_loaded_exactly(out: dict) -> None:
    assert "error" not in out, out
    assert out["same_tree"] and out["max_diff"] == 0.0
    assert out["sharded_leaves"] > 10  # fsdp=4 really splits the weights
    assert out["wrong_shardings"] == []


def test_stacked_checkpoint_loads_sharded_over_four_devices(results):
    """gemma's loader puts a layer's fsdp split on the stacked layer axis
    (2 layers over 4 devices: IndivisibleError); the trainer's loader reads
    the same checkpoint with every leaf in the run's own sharding."""
    out = results["stacked-trainer"]
    assert any("stacked_layers/attention_type_0" in n for n in out["reads"]), out["reads"]
    _assert_loaded_exactly(out)


def test_gemma_loader_fails_on_the_same_stacked_checkpoint(results):
    out = results["stacked-gemma"]
    assert "IndivisibleError" in out.get("error", ""), out


@pytest.mark.parametrize("layout", ["nested", "vision"])
def test_text_only_load_never_reads_the_vision_tower(results, layout):
    out = results[f"{layout}-trainer"]
    _assert_loaded_exactly(out)
    assert not [n for n in out["reads"] if "vision" in n or "mm_" in n], out["reads"]
    assert any("layer_1" in n for n in out["reads"])


def test_gemma_loader_reads_the_vision_tower(results):
    """What the spy catches: gemma's text_only load reads (then deletes) it."""
    out = results["vision-gemma"]
    assert "vision_encoder.patch.w" in out["reads"] and "embedder.mm_input_projection.w" in out["reads"]
