"""A run whose model does not fit its pool's chips is refused before anything is declared, naming the run,
the model, the pool and the memory it needs against what the pool offers (admission/accelerator_memory.py)."""

from __future__ import annotations

import pytest

from admission import accelerator_memory as am
from admission.check import stack_manifests
from core import compiled_hbm
from core.models import MODELS
from stack.problems import ConfigError
from tests.support.pulumi_harness import ROOT, SHIPPED_STACKS, declared_before_error
from stack.reader import load_files
from trainers.gemma_jax import memory
from trainers.gemma_jax.flags import MODEL_NAMES

A4 = {"name": "a4", "accelerator": "nvidia-b200", "capacity": "reservation", "reservation": "r",
      "zones": ["us-central1-b"]}
# A4 machines are offered in us-central1-b, not in the dev stack's us-east5 (core/offerings.py).
A4_REGION = {"gke-finetune:region": "us-central1", "gke-finetune:zones": ["us-central1-b"]}


def _memory(stack: str) -> dict[str, am.ChipMemory | None]:
    config = load_files(stack, ROOT)
    manifests, contracts = stack_manifests(config), config.contracts()
    out = {}
    for run in config.runs:
        pod = manifests[run.name]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        out[run.name] = am.run_memory(run, contracts[run.pool], pod["containers"][0], config.stack)
    return out


def test_the_models_by_name_are_the_jax_trainer_s_and_have_shapes():
    assert set(MODELS) == {n for n in MODEL_NAMES if not n.startswith("tiny")} == set(memory.shapes())


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_every_shipped_run_fits_and_a_compiled_tpu_run_is_judged_by_the_compiler(stack):
    for name, found in _memory(stack).items():
        if found is None:  # one's own container
            continue
        assert found.fits, found
        compiled = compiled_hbm.read().get(f"{stack}/{name}")
        if compiled is not None:  # every shipped TPU run is compiled: its figure, not the estimate
            assert found.how.startswith("the TPU compiler"), found
            assert found.needed_gib == pytest.approx(compiled["bytes"]["per_chip"] / compiled_hbm.GIB)


@pytest.mark.parametrize("overrides, expected", [
    # TPU: Gemma 3 27B, full fine-tune, replicated on one v6e chip.
    ({"gke-finetune:runs": [{"name": "big", "trainer": "gemma-jax", "pool": "v6e-1x1", "data": "tinystories",
                             "model": "gemma3-27b"}]},
     "runs[0]: 'big' needs 752.3 GiB per chip for model gemma3-27b (estimate of trainers/gemma_jax/memory.py, "
     "calibrated on the TPU compiler, at least 677.1 GiB within its tolerance), but a chip of pool 'v6e-1x1' "
     "offers 31.24 GiB and 1.0 GiB of it must stay free; allowed: a pool of more (or larger) chips"),
    # GPU: Gemma 3 27B with micro-batches of 64 x 8192 tokens: the logits alone outgrow a B200.
    ({**A4_REGION, "gke-finetune:pools": [A4], "gke-finetune:datasets": [],
      "gke-finetune:runs": [{"name": "huge", "trainer": "trl-gpu", "pool": "a4", "model": "gemma3-27b",
                             "args": ["--per_device_train_batch_size", "64", "--max_length", "8192"]}]},
     "runs[0]: 'huge' needs 1723.0 GiB per chip for model gemma3-27b (estimate of admission/accelerator_memory.py "
     "from the model's shapes), but a chip of pool 'a4' offers 180.00 GiB and 18.0 GiB of it must stay free"),
])  # fmt: skip
def test_a_model_the_pool_cannot_hold_is_refused_before_anything_is_declared(overrides, expected):
    declared, err = declared_before_error("dev", overrides=overrides)
    assert isinstance(err, ConfigError) and declared.resources == []
    assert any(p.startswith(expected) for p in err.problems), err.problems


def test_an_estimate_within_its_tolerance_of_the_chip_is_tight_not_refused():
    """The shipped single-host shape (64 x 256 tokens on one chip) is 30.4 GiB by the estimate, 29.89 by the
    compiler: an uncompiled run of it is tight, left to the compiler, not refused."""
    found = am.ChipMemory("r", "gemma3-270m", "v6e-1x1", memory.estimate_run(["--batch_size", "64"], 1).total_gib,
                          memory.HBM_GIB, memory.MARGIN_GIB, "estimate", tolerance=memory.CALIBRATION_TOLERANCE)
    assert found.needed_gib + found.margin_gib > found.offered_gib and found.fits and found.tight
    over = am.ChipMemory("r", "m", "p", 40.0, 31.24, 1.0, "estimate", tolerance=0.10)
    assert not over.fits and not over.tight


def test_lora_and_fsdp_make_the_same_model_fit_a_larger_slice():
    """What the refusal suggests works: LoRA with --fsdp over a v6e 4x4 slice holds Gemma 3 27B."""
    shape = memory.shapes()["gemma3-27b"]
    full = memory.estimate_run(["--model", "gemma3-27b"], 1)
    lora = memory.estimate_run(["--model", "gemma3-27b", "--lora_rank", "16", "--fsdp", "--batch_size", "64"], 16)
    assert full.total_gib > memory.HBM_GIB and memory.fits(lora), lora
    assert lora.weights_gib == pytest.approx((18 * shape.adapters(16) + 2 * (shape.params - shape.adapters(16)))
                                             / 16 / 2**30)


def test_the_gpu_estimate_by_hand_and_the_host_memory_a_load_needs():
    shape = memory.shapes()["gemma4-31b"]
    d, v, n = shape.embed_dim, shape.num_embed, len(shape.layers)
    layer = (shape.params - v * d) / n
    one = max(2 * (6 * d + 2 * shape.num_heads * k + 2 * g * k + 3 * f) for k, g, f in shape.layers)
    expected = (2 * shape.params / 8 + 4 * layer + 16 * shape.adapters(16) / 8
                + 8 * 1024 * (n * 2 * d + one + 10 * v) + 3 * 2**30)
    assert am.gpu_bytes(shape, 8, 8, 1024, 16, True) == pytest.approx(expected)
    assert am.gpu_bytes(shape, 8, 8, 1024, 16, False) > am.gpu_bytes(shape, 8, 8, 1024, 16, True)
    found = _memory("a4")["gemma4-sql"]
    assert found.model == "gemma4-31b" and found.fits  # the A4 recipe: about 39 GiB of 180 per B200
    assert found.host_needed_gib == pytest.approx(8 * 2 * shape.params / 2**30)  # 457 GiB, of 3772 requested
    too_small = am.ChipMemory("r", "gemma4-31b", "a4", 39.0, 180, 18, "estimate", 457.0, 400.0)
    assert not too_small.fits and am.why(too_small).startswith(
        "needs 457 GiB of host memory to load model gemma4-31b (a bf16 copy per GPU), but its container on pool "
        "'a4' gets 400 GiB")
