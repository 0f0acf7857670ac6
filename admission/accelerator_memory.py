"""Does a run's model fit its pool's accelerators? Its memory per chip against what a chip offers.

TPU (a trainer with a `memory_module`: the JAX trainer): the TPU compiler's own figure where
core/compiled_hbm.json holds the run's program (keyed by what determines it: model, batch, sequence
length, LoRA rank, FSDP, dtypes, loss mask and the slice; the memory module's `program_key`), else the
trainer's memory model (trainers/gemma_jax/memory.py), calibrated on that compiler; a chip offers the HBM the
compiler reports, and 1 GiB must stay free (core/compiled_hbm.py MARGIN_GIB). The model is within
its CALIBRATION_TOLERANCE (10%) of the compiler on the compiled runs, so a run is refused on an
estimate only when it exceeds the chip even 10% lower; within that band it is `tight`: `make
tpu-compile` gives the compiler's own figure.

GPU (the GPU trainer: LoRA under FSDP over the node's GPUs, bf16, its flags from its snapshot):
an estimate from the model's shapes (trainers/gemma_jax/model_shapes.json, gemma's own configs),
per GPU, in bytes:
  - the base weights in bf16, sharded over the N GPUs: 2 P / N;
  - the layers FSDP holds gathered at once, the one computing and the one prefetched: 2 x 2 P_layer,
    with P_layer = (P - V D) / layers (the tied embedding aside);
  - the LoRA adapters' fp32 weights, gradients and Adam moments, sharded: 16 A / N;
  - activations for one micro-batch of T = per_device_train_batch_size x max_length tokens: with
    activation checkpointing (the trainer's default) each layer's input, 2 D per token and layer, and
    one layer's activations, recomputed (2 (6 D + 2 H K + 2 G K + 3 F) per token: norms and
    projections' inputs, queries, keys, values, attention output, gate, up and their product; sdpa
    keeps no attention matrix); without it, every layer's; the logits, in bf16, in float32 and their
    gradient, 10 V per token;
  - 3 GiB for the CUDA context, NCCL's buffers and the allocator's fragmentation.
  A GPU must keep 10% of its memory free beyond that, for what the estimate leaves out. The
  estimate is from the shapes only, not measured on a GPU. The host must also hold every rank's
  bf16 copy of the whole model while it loads (transformers 5.24 reads the checkpoint on every rank:
  trainers/trl_gpu/README.md), N x 2 P, within the container's memory request.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass

from core import compiled_hbm, quantity
from core.catalog import Family
from core.contract import SchedulingContract
from core.models import MODELS, by_hub_id

GIB = 2**30
GPU_RUNTIME_GIB = 3.0
GPU_MARGIN_FRACTION = 0.10


@dataclass(frozen=True)
class ChipMemory:
    """A run's memory per chip (and, on GPU, its host memory while loading) against what the pool offers."""

    run: str
    model: str
    pool: str
    needed_gib: float
    offered_gib: float
    margin_gib: float
    how: str
    host_needed_gib: float | None = None
    host_offered_gib: float | None = None
    tolerance: float = 0.0  # how far below `needed_gib` the truth may be (an estimate's calibration)

    @property
    def chip_fits(self) -> bool:
        """Refused otherwise: over the chip even at the low end of the estimate's tolerance."""
        return self.needed_gib * (1 - self.tolerance) + self.margin_gib <= self.offered_gib

    @property
    def tight(self) -> bool:
        """Within the estimate's tolerance of the chip: the compiler's own figure decides."""
        return self.chip_fits and self.needed_gib + self.margin_gib > self.offered_gib

    @property
    def host_fits(self) -> bool:
        return self.host_needed_gib is None or self.host_needed_gib <= self.host_offered_gib

    @property
    def fits(self) -> bool:
        return self.chip_fits and self.host_fits


def run_model(run, args: list[str]) -> str | None:
    """The model a trainer's run fine-tunes, by its name (core/models.py), from its container's `args`
    (the platform's model flags included); None for a model the platform does not know."""
    if run.trainer is None or run.row.model_flags is None:
        return None
    if run.model is not None:
        return run.model
    flags = importlib.import_module(run.row.flags_module)
    if run.row.model_flags.by_hub_id:  # the GPU trainer: a Hub id
        found = by_hub_id(str(flags.flag_values(args).get(run.row.model_flags.model.lstrip("-")) or ""))
        return found.name if found else None
    name = flags.parse(args).model  # the JAX trainer: its own model names, test models among them
    return name if name in MODELS else None


def _tpu(run, contract: SchedulingContract, args: list[str], chips: int) -> ChipMemory | None:
    row = run.row
    module, flags = importlib.import_module(row.memory_module), importlib.import_module(row.flags_module)
    model = flags.parse(args).model
    if model not in module.shapes():  # a test model: nothing to estimate
        return None
    found = compiled_hbm.lookup(module.program_key(args, contract.shape.topology, contract.slices))
    if found is not None and found.per_chip_gib is not None:
        return ChipMemory(run.name, model, run.pool, found.per_chip_gib, found.hbm_gib, compiled_hbm.MARGIN_GIB,
                          f"the TPU compiler's figure (libtpu {found.libtpu})")
    estimate = module.estimate_run(args, chips, contract.slices)
    return ChipMemory(run.name, model, run.pool, estimate.total_gib, module.HBM_GIB, module.MARGIN_GIB,
                      "estimate of trainers/gemma_jax/memory.py, calibrated on the TPU compiler",
                      tolerance=module.CALIBRATION_TOLERANCE)


def gpu_bytes(shape, gpus: int, micro_batch: int, max_length: int, lora_rank: int, checkpointing: bool) -> float:
    """The module docstring's per-GPU estimate, in bytes."""
    d, h, v, layers = shape.embed_dim, shape.num_heads, shape.num_embed, shape.layers
    per_layer_params = (shape.params - v * d) / len(layers)
    weights = 2 * shape.params / gpus + 2 * 2 * per_layer_params + 16 * shape.adapters(lora_rank) / gpus
    one_layer = [2 * (6 * d + 2 * h * k + 2 * g * k + 3 * f) for k, g, f in layers]
    tokens = micro_batch * max_length
    kept = len(layers) * 2 * d + max(one_layer) if checkpointing else sum(one_layer)
    return weights + tokens * (kept + 10 * v) + GPU_RUNTIME_GIB * GIB


def _gpu(run, contract: SchedulingContract, args: list[str], gpus: int, memory_request: str) -> ChipMemory | None:
    from trainers.gemma_jax.memory import shapes  # pylint: disable=import-outside-toplevel

    values = importlib.import_module(run.row.flags_module).flag_values(args)
    model = run.model or getattr(by_hub_id(str(values.get("model_id") or "")), "name", None)
    if model is None or model not in shapes():  # a model the platform does not know: not estimated
        return None
    shape, hbm = shapes()[model], contract.shape.accelerator.hbm_gib_per_chip
    needed = gpu_bytes(shape, gpus, int(values["per_device_train_batch_size"]), int(values["max_length"] or 1024),
                       int(values["lora_r"]), bool(values["activation_checkpointing"]))
    return ChipMemory(run.name, model, run.pool, needed / GIB, hbm, GPU_MARGIN_FRACTION * hbm,
                      "estimate of admission/accelerator_memory.py from the model's shapes",
                      host_needed_gib=gpus * 2 * shape.params / GIB,
                      host_offered_gib=quantity.gib(memory_request))


def run_memory(run, contract: SchedulingContract, container: Mapping) -> ChipMemory | None:
    """The run's memory per chip, from its container as the manifest builds it; None where not known
    (one's own container, a model the platform has no shapes of)."""
    if run.trainer is None:
        return None
    args, chips = list(container.get("args", [])), run.chips_per_host or contract.chips_per_host
    if contract.family is Family.TPU and run.row.memory_module:
        return _tpu(run, contract, args, chips * contract.hosts_per_slice * contract.slices)
    if contract.family is Family.GPU and run.row.flags_module:
        return _gpu(run, contract, args, chips, container["resources"]["requests"]["memory"])
    return None


def why(m: ChipMemory) -> str:
    """What a run that does not fit needs against what its pool offers."""
    if not m.chip_fits:
        low = f", at least {m.needed_gib * (1 - m.tolerance):.1f} GiB within its tolerance" if m.tolerance else ""
        return (f"needs {m.needed_gib:.1f} GiB per chip for model {m.model} ({m.how}{low}), but a chip of pool "
                f"{m.pool!r} offers {m.offered_gib:.2f} GiB and {m.margin_gib:.1f} GiB of it must stay free")
    return (f"needs {m.host_needed_gib:.0f} GiB of host memory to load model {m.model} (a bf16 copy per GPU), but "
            f"its container on pool {m.pool!r} gets {m.host_offered_gib:.0f} GiB")
