"""Per-chip memory estimate of a training run, per model size and mode.

    python -m trainers.gemma_jax.memory [--batch_size 128 --maxlen 256]
    python -m trainers.gemma_jax.memory --write-shapes   # model_shapes.json, from gemma's own configs

prints the README's table: for each model and mode (full fine-tune or
LoRA rank 16, replicated or --fsdp over the slice) the smallest v6e slice
whose chips hold the estimate with MARGIN_GIB to spare, and the GiB per
chip there.

Standard library only at import: the platform estimates a run's memory per
chip from its flags before anything is declared (`estimate_run`), with the
models' shapes from `model_shapes.json` (parameters, LoRA-16 adapters and
the dimensions counted below), which `--write-shapes` writes from gemma's
own model configs and tests/gemma_jax/test_memory.py keeps equal to them.

What is counted, per chip (bytes; an estimate, calibrated on the compiler):

- trained weights: float32 master (4) + Adam mu and nu (8) + float32
  gradient (4) + the bfloat16 copy the forward pass uses (2) = 18 per
  trained parameter; a LoRA run's frozen base: 2 per parameter (bfloat16).
  With --fsdp all of it is split over the slice's chips; without, every
  chip holds all of it.
- activations kept for the backward pass, for the chip's rows of the
  global batch (batch_size / chips, maxlen tokens each), per token: in
  bfloat16 per layer the inputs of the 4 norms and of the attention and MLP
  projections (6·D), queries, keys and values (H·K + 2·G·K), the attention
  output (H·K), gate, up and their product (3·F); the attention
  probabilities in float32 (H·maxlen); and once, the logits in bfloat16
  and float32 plus their softmax gradient in float32 (10·V). Gemma 4 global
  layers use their own key size; a mixture-of-experts MLP counts its top-k
  experts and its dense branch. That count is what a step without fusion
  would keep; the TPU compiler fuses elementwise work and keeps less, so
  the count is scaled by ACTIVATION_CALIBRATION, measured on the compiled
  shipped runs (core/compiled_hbm.json, `make tpu-compile`).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import pathlib

# What the TPU compiler says one v6e chip offers (libtpu 0.0.50.1: its
# CompileTimeHbmOom error reads "exceeds available HBM (31.24G)"; the chip
# has 32 GiB, the runtime keeps the rest). tests/gemma_jax/
# test_compiled_hbm.py checks it against the compiled table.
HBM_GIB = 31.24
# Left free beyond the step's own buffers (core/compiled_hbm.py says why; the
# tests hold the two equal).
MARGIN_GIB = 1.0
# The compiler's temporaries beyond the float32 gradient, over the count
# above, for Gemma 3 270M at maxlen 256: (28.82e9 - 4.55e9 bytes) of temps
# between the 1x1 run (16,384 tokens per chip) and the 2x4 run (2,048) is
# 1.693 MB per token against the 3.147 MB counted. Measured on one model
# and one maxlen: other sizes are an extrapolation.
ACTIVATION_CALIBRATION = 0.54
# How far the estimate may be from the compiler on the compiled runs.
CALIBRATION_TOLERANCE = 0.10
V6E_SLICES = (1, 4, 8, 16, 32, 64, 128, 256)
LORA_RANK = 16
GIB = 2**30
SHAPES = pathlib.Path(__file__).with_name("model_shapes.json")


@dataclasses.dataclass(frozen=True)
class Estimate:
    weights_gib: float
    activations_gib: float

    @property
    def total_gib(self) -> float:
        return self.weights_gib + self.activations_gib


def _layer_dims(config):
    """[(K, G, F)] per layer: key size, key/value heads, MLP width per token."""
    out = []
    for t in config.attention_types:
        k, g = config.head_dim, config.num_kv_heads
        if t.name == "GLOBAL" and getattr(config, "global_key_size", None):
            k = config.global_key_size
            g = getattr(config, "num_global_kv_heads", None) or g
        f = config.hidden_dim
        if getattr(config, "enable_moe", False):
            f = config.moe_dense_hidden_dim + config.top_k_experts * config.expert_dim
        out.append((k, g, f))
    return out


@dataclasses.dataclass(frozen=True)
class Shape:
    """What the estimate counts of a model: parameters, LoRA-16 adapter parameters, dimensions."""

    params: int
    lora16_params: int
    embed_dim: int
    num_heads: int
    num_embed: int
    layers: tuple[tuple[int, int, int], ...]  # (key size, key/value heads, MLP width per token)

    def adapters(self, rank: int) -> int:
        """LoRA parameters at `rank`: each adapter is rank x (inputs + outputs)."""
        return self.lora16_params * rank // LORA_RANK


@functools.cache
def shapes() -> dict[str, Shape]:
    table = json.loads(SHAPES.read_text())["models"]
    return {name: Shape(**{**v, "layers": tuple(map(tuple, v["layers"]))}) for name, v in table.items()}


def shape_of(config, params: int, lora16_params: int) -> Shape:
    return Shape(params, lora16_params, config.embed_dim, config.num_heads, config.num_embed,
                 tuple(_layer_dims(config)))


def activation_bytes_per_token(config, maxlen: int) -> float:
    shape = config if isinstance(config, Shape) else shape_of(config, 0, 0)
    d, h = shape.embed_dim, shape.num_heads
    total = 0.0
    for k, g, f in shape.layers:
        total += 2 * (6 * d + h * k + 2 * g * k + h * k + 3 * f) + 4 * h * maxlen
    return total + 10 * shape.num_embed


def estimate(total_params: int, trained_params: int, lora: bool, config, *, chips: int,
             fsdp: int, batch_size: int, maxlen: int) -> Estimate:
    """GiB per chip of one run (see the module docstring); `fsdp`: the chips
    the weights are split over (1: replicated)."""
    frozen = total_params - trained_params if lora else 0
    weights = (18 * trained_params + 2 * frozen) / fsdp
    rows = batch_size / chips
    acts = ACTIVATION_CALIBRATION * rows * maxlen * activation_bytes_per_token(config, maxlen)
    return Estimate(weights / GIB, acts / GIB)


def fits(e: Estimate) -> bool:
    return e.total_gib <= HBM_GIB - MARGIN_GIB


def estimate_run(argv: list[str], chips: int, slices: int = 1) -> Estimate:
    """The estimate for a run's own flags on `chips` chips (all slices); standard library only."""
    from trainers.gemma_jax import flags  # pylint: disable=g-import-not-at-top

    cfg = flags.parse(argv)
    shape = shapes()[cfg.model]
    lora = cfg.lora_rank > 0
    shards = chips // slices if cfg.fsdp == -1 else cfg.fsdp
    trained = shape.adapters(cfg.lora_rank) if lora else shape.params
    return estimate(shape.params, trained, lora, shape, chips=chips, fsdp=shards,
                    batch_size=cfg.batch_size, maxlen=cfg.maxlen)


# The flags the train step's program is built from (components.model_parts, steps.make_train_step,
# aot.abstract_inputs), which with the slice decide what the compiler assigns per chip. The learning
# rate, warmup, seed and everything about data, checkpoints and logs are not among them.
PROGRAM_FLAGS = ("model", "batch_size", "maxlen", "lora_rank", "fsdp", "param_dtype", "master_dtype")


def program_key(argv: list[str], topology: str, slices: int = 1) -> dict:
    """What the compiled train step of a run's flags depends on, on `slices` v6e slices of `topology`
    (core/compiled_hbm.py keys its figures by it); standard library only."""
    from trainers.gemma_jax import flags  # pylint: disable=g-import-not-at-top
    from trainers.sft_data import formats, mixture  # pylint: disable=g-import-not-at-top

    cfg = flags.parse(argv)
    key = {name: getattr(cfg, name) for name in PROGRAM_FLAGS}
    try:  # components.needs_loss_mask: any dataset's format
        formats_of = [s.spec.format for s in mixture.parse(cfg.data_mix, cfg.loss_on)] if cfg.data_mix else []
    except formats.FormatError:
        formats_of = []  # refused by the trainer at start-up; the stack checks it first
    key["loss_mask"] = any(formats.trains_some_tokens(f, cfg.loss_on) for f in formats_of or [cfg.data_format])
    return {**key, "topology": topology, "slices": slices}


def program_args(key: dict) -> list[str]:
    """Trainer flags that build exactly the program of `key` (what `make tpu-compile` compiles)."""
    args = [f"--{name}={key[name]}" for name in PROGRAM_FLAGS]
    return args + (["--data_format=conversational"] if key["loss_mask"] else [])


def real_shapes(names=None) -> dict[str, dict]:
    """model_shapes.json's content, from gemma's own model configs (needs jax and gemma)."""
    from trainers.gemma_jax import model as model_lib  # pylint: disable=g-import-not-at-top

    out = {}
    for name in names or [n for n in model_lib.MODELS if not n.startswith("tiny")]:
        total, adapters, config = model_counts(name)
        out[name] = dataclasses.asdict(shape_of(config, total, adapters))
    return out


def write_shapes(path: pathlib.Path = SHAPES) -> None:
    about = ("Gemma models as trainers/gemma_jax/memory.py counts them, from gemma's own configs; "
             "regenerate: python -m trainers.gemma_jax.memory --write-shapes")
    models = ",\n".join(f"  {json.dumps(n)}: {json.dumps(v)}" for n, v in real_shapes().items())
    path.write_text(f'{{\n "about": {json.dumps(about)},\n "models": {{\n{models}\n }}\n}}\n')


def smallest_slice(fits) -> int | None:
    return next((n for n in V6E_SLICES if fits(n)), None)


def model_counts(name: str, rank: int = LORA_RANK):
    """(total params, LoRA-`rank` trainable params, text config) from the shapes."""
    import jax  # pylint: disable=g-import-not-at-top

    from trainers.gemma_jax import model as model_lib  # pylint: disable=g-import-not-at-top

    base = model_lib.build_model(name, 0, "bfloat16", 0)
    total = sum(x.size for x in jax.tree.leaves(model_lib.abstract_params(base, 8)))
    lora = model_lib.build_model(name, 0, "bfloat16", rank)
    adapters, _ = model_lib.split_trainable(model_lib.abstract_params(lora, 8), True)
    return total, sum(x.size for x in jax.tree.leaves(adapters)), base.config


MODES = (("full", False, False), ("full, --fsdp", False, True), ("LoRA 16", True, False), ("LoRA 16, --fsdp", True, True))


def table(batch_size: int, maxlen: int, names=None) -> str:
    from trainers.gemma_jax import model as model_lib  # pylint: disable=g-import-not-at-top

    names = names or [n for n in model_lib.MODELS if not n.startswith("tiny")]
    lines = ["| model | params | " + " | ".join(m for m, _, _ in MODES) + " |",
             "| --- | --- |" + " --- |" * len(MODES)]
    for name in names:
        total, adapters, config = model_counts(name)
        cells = []
        for _, lora, fsdp in MODES:
            def per_chip(n, lora=lora, fsdp=fsdp):
                trained = adapters if lora else total
                return estimate(total, trained, lora, config, chips=n, fsdp=n if fsdp else 1,
                                batch_size=batch_size, maxlen=maxlen)
            n = smallest_slice(lambda n, f=per_chip: fits(f(n)))
            cells.append("no slice" if n is None else f"v6e-{n}: {per_chip(n).total_gib:.1f} GiB")
        lines.append(f"| {name} | {total / 1e9:.2f}B | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m trainers.gemma_jax.memory")
    p.add_argument("--batch_size", type=int, default=128)
    p.add_argument("--maxlen", type=int, default=256)
    p.add_argument("--write-shapes", action="store_true", help=f"write {SHAPES.name} and exit")
    args = p.parse_args()
    if args.write_shapes:
        write_shapes()
        print(f"wrote {SHAPES}")
        return
    print(table(args.batch_size, args.maxlen))


if __name__ == "__main__":
    main()
