"""LoRA on Gemma 4 (trainers/gemma_jax/lora.py), on the two-layer
`tiny-gemma4` config over a frozen base saved with gemma's save_params."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from gemma_jax_helpers import REPO, base_args, cpu_env, load_params, max_abs_diff, run_train
from tests.support.checkpoints import stopped_after

pytestmark = pytest.mark.slow
STEPS = 8


@pytest.fixture(scope="module")
def gemma4_base(tmp_path_factory, tokenizer_file) -> str:
    path = str(tmp_path_factory.mktemp("g4") / "base")
    code = (
        "import jax, jax.numpy as jnp\n"
        "from gemma import gm\n"
        "from trainers.gemma_jax import model as M\n"
        f"tok = M.load_tokenizer('tiny-gemma4', {tokenizer_file!r})\n"
        "m = M.build_model('tiny-gemma4', tok.vocab_size, 'float32', 0)\n"
        "p = m.init(jax.random.key(5), jnp.zeros((1, 8), jnp.int32))['params']\n"
        f"gm.ckpts.save_params(p, {path!r}, wait_until_finished=True)\n"
    )
    subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=cpu_env(1), check=True, timeout=300
    )
    return path


def _args(stories_file, tokenizer_file, base, d, steps):
    return base_args(
        stories_file,
        tokenizer_file,
        d / "ckpt",
        d / "logs",
        model="tiny-gemma4",
        pretrained=base,
        lora_rank=4,
        steps=steps,
        save_every=4,
        learning_rate=1e-2,
    )


@pytest.fixture(scope="module")
def reference(tmp_path_factory, stories_file, tokenizer_file, gemma4_base):
    d = tmp_path_factory.mktemp("g4ref")
    res = run_train(_args(stories_file, tokenizer_file, gemma4_base, d, STEPS))
    assert res.returncode == 0, res.stdout + res.stderr
    return d, res.stdout


def _leaf_paths(tree):
    import jax  # pylint: disable=g-import-not-at-top

    return [(jax.tree_util.keystr(k), v) for k, v in jax.tree_util.tree_leaves_with_path(tree)]


def _adapter_and_other_leaves(params) -> tuple[dict, dict]:
    import jax  # pylint: disable=g-import-not-at-top

    flat = {jax.tree_util.keystr(k): v for k, v in jax.tree_util.tree_leaves_with_path(params)}
    lora = {k: v for k, v in flat.items() if "['lora']" in k}
    return lora, {k: v for k, v in flat.items() if k not in lora}


def test_adapters_on_every_gemma4_block_and_only_they_are_trained(reference):
    d, out = reference
    params = load_params(str(d / "ckpt"), STEPS)
    lora, other = _adapter_and_other_leaves(params)
    # Checkpoint and optimizer hold adapters only: the frozen base is not there.
    assert other == {}, sorted(other)[:5]
    import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top

    with ocp.StandardCheckpointer() as ckptr:
        saved = ckptr.metadata(str(d / "ckpt" / str(STEPS) / "state")).item_metadata.tree
    weights = [(p, x) for p, x in _leaf_paths(saved) if len(x.shape) >= 2]
    assert weights and all("lora" in p for p, _ in weights), [p for p, _ in weights if "lora" not in p][:5]
    assert sum(1 for p, _ in weights if "opt_state" in p) == 2 * len(lora)  # Adam mu and nu
    for layer in ("layer_0", "layer_1"):
        for proj in ("q_einsum", "kv_einsum", "attn_vec_einsum", "gating_einsum", "linear"):
            keys = [k for k in lora if f"['{layer}']" in k and proj in k]
            assert len(keys) == 2, (layer, proj, sorted(lora))  # a and b
    # B starts at zero: every adapter moved.
    assert all(np.any(v != 0) for k, v in lora.items() if k.endswith("['b']"))
    trainable = float(out.split("M trainable")[0].split()[-1])
    total = float(out.split("M params")[0].split()[-1])
    assert 0 < trainable < 0.2 * total, out
    meta = json.load(open(d / "ckpt" / str(STEPS) / "meta" / "metadata", encoding="utf-8"))
    assert meta["lora_rank"] == 4 and meta["base"] and meta["model"] == "tiny-gemma4"


def test_adapters_start_transparent_and_steps_move_only_them():
    """In process: with B = 0 the LoRA model computes the base model's
    logits exactly; train steps change every adapter and leave the frozen
    base (a separate, non-donated input) bit-identical."""
    import jax  # pylint: disable=g-import-not-at-top
    import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

    from trainers.gemma_jax import model as model_lib  # pylint: disable=g-import-not-at-top
    from trainers.gemma_jax import steps  # pylint: disable=g-import-not-at-top

    base_model = model_lib.build_model("tiny-gemma4", 64, "float32", 0)
    lora_model = model_lib.build_model("tiny-gemma4", 64, "float32", 4)
    tokens = jax.random.randint(jax.random.key(0), (2, 16), 4, 64)
    base = base_model.init(jax.random.key(1), tokens)["params"]
    adapters, _ = model_lib.split_trainable(
        lora_model.init(jax.random.key(2), tokens)["params"], True
    )
    merged = model_lib.merge_params(adapters, base, True)
    np.testing.assert_array_equal(
        lora_model.apply({"params": merged}, tokens).logits,
        base_model.apply({"params": base}, tokens).logits,
    )
    optimizer = steps.make_optimizer(1e-2, 0)
    state = steps.init_state(adapters, optimizer, None, jnp.float32)
    before = jax.tree.map(np.asarray, state["params"])
    frozen_before = jax.tree.map(np.asarray, base)
    step = steps.make_train_step(lora_model, optimizer, True, None)
    batch = {
        "tokens": tokens,
        "segment_ids": jnp.ones_like(tokens),
        "positions": jnp.broadcast_to(jnp.arange(16), tokens.shape),
    }
    for _ in range(3):
        state, _ = step(state, base, batch)
    moved = jax.tree.map(lambda a, b: bool(np.any(np.asarray(a) != b)), state["params"], before)
    assert all(jax.tree.leaves(moved)), moved
    same = jax.tree.map(lambda a, b: bool(np.array_equal(np.asarray(a), b)), base, frozen_before)
    assert all(jax.tree.leaves(same))


def test_resume_is_exact(tmp_path, stories_file, tokenizer_file, gemma4_base, reference):
    ref_dir, _ = reference
    # The reference run stopped after step 4's checkpoint, restarted to step 8.
    stopped_after(ref_dir / "ckpt" / str(STEPS // 2), tmp_path / "ckpt")
    second = run_train(_args(stories_file, tokenizer_file, gemma4_base, tmp_path, STEPS))
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"resumed from step {STEPS // 2}" in second.stdout
    resumed = load_params(str(tmp_path / "ckpt"), STEPS)
    assert max_abs_diff(resumed, load_params(str(ref_dir / "ckpt"), STEPS)) < 1e-6


@pytest.mark.parametrize("name", ["tiny", "tiny-gemma4"])
def test_merged_adapters_compute_what_the_lora_model_does(name):
    """lora.merge folds A·B into each wrapped weight (export of a LoRA run):
    the plain model on the merged weights gives the LoRA model's logits."""
    import jax  # pylint: disable=g-import-not-at-top

    from trainers.gemma_jax import lora  # pylint: disable=g-import-not-at-top
    from trainers.gemma_jax import model as model_lib  # pylint: disable=g-import-not-at-top

    base_model = model_lib.build_model(name, 64, "float32", 0)
    lora_model = model_lib.build_model(name, 64, "float32", 4)
    tokens = jax.random.randint(jax.random.key(0), (2, 16), 4, 64)
    base = base_model.init(jax.random.key(1), tokens)["params"]
    adapters, _ = model_lib.split_trainable(lora_model.init(jax.random.key(2), tokens)["params"], True)
    # Non-zero B everywhere, so every adapter contributes.
    keys = iter(jax.random.split(jax.random.key(3), len(jax.tree.leaves(adapters))))
    adapters = jax.tree.map(lambda x: 0.05 * jax.random.normal(next(keys), x.shape), adapters)
    with_lora = lora_model.apply({"params": model_lib.merge_params(adapters, base, True)}, tokens).logits
    merged = lora.merge(jax.tree.map(np.asarray, base), jax.tree.map(np.asarray, adapters))
    plain = base_model.apply({"params": merged}, tokens).logits
    without = base_model.apply({"params": base}, tokens).logits
    assert float(np.max(np.abs(with_lora - without))) > 1e-2  # the adapters matter
    np.testing.assert_allclose(plain, with_lora, atol=2e-5, rtol=1e-4)
