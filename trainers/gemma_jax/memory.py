"""Per-chip memory estimate of a training run, per model size and mode.

    python -m trainers.gemma_jax.memory [--batch_size 128 --maxlen 256]

prints the README's table: for each model and mode (full fine-tune or
LoRA rank 16, replicated or --fsdp over the slice) the smallest v6e slice
whose chips (32 GB of HBM each) hold the estimate, and the GB per chip there.

What is counted, per chip (bytes; an estimate, not a measurement):

- trained weights: float32 master (4) + Adam mu and nu (8) + float32
  gradient (4) + the bfloat16 copy the forward pass uses (2) = 18 per
  trained parameter; a LoRA run's frozen base: 2 per parameter (bfloat16).
  With --fsdp all of it is split over the slice's chips; without, every
  chip holds all of it.
- activations kept for the backward pass (no rematerialization), for the
  chip's rows of the global batch (batch_size / chips, maxlen tokens each),
  per token: in bfloat16 per layer the inputs of the 4 norms and of the
  attention and MLP projections (6·D), queries, keys and values (H·K + 2·G·K),
  the attention output (H·K), gate, up and their product (3·F); the
  attention probabilities in float32 (H·maxlen); and once, the logits in
  bfloat16 and float32 plus their softmax gradient in float32 (10·V).
  Gemma 4 global layers use their own key size; a mixture-of-experts MLP
  counts its top-k experts and its dense branch.
"""

from __future__ import annotations

import argparse
import dataclasses

HBM_GB = 32  # one v6e chip
V6E_SLICES = (1, 4, 8, 16, 32, 64, 128, 256)
LORA_RANK = 16
GB = 1e9


@dataclasses.dataclass(frozen=True)
class Estimate:
    weights_gb: float
    activations_gb: float

    @property
    def total_gb(self) -> float:
        return self.weights_gb + self.activations_gb


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


def activation_bytes_per_token(config, maxlen: int) -> float:
    d, h = config.embed_dim, config.num_heads
    total = 0.0
    for k, g, f in _layer_dims(config):
        total += 2 * (6 * d + h * k + 2 * g * k + h * k + 3 * f) + 4 * h * maxlen
    return total + 10 * config.num_embed


def estimate(total_params: int, trained_params: int, lora: bool, config, *, chips: int,
             fsdp: bool, batch_size: int, maxlen: int) -> Estimate:
    """GB per chip of one run (see the module docstring)."""
    frozen = total_params - trained_params if lora else 0
    weights = 18 * trained_params + 2 * frozen
    if fsdp:
        weights /= chips
    rows = batch_size / chips
    acts = rows * maxlen * activation_bytes_per_token(config, maxlen)
    return Estimate(weights / GB, acts / GB)


def smallest_slice(fits) -> int | None:
    return next((n for n in V6E_SLICES if fits(n)), None)


def model_counts(name: str):
    """(total params, LoRA-16 trainable params, text config) from the shapes."""
    import jax  # pylint: disable=g-import-not-at-top

    from trainers.gemma_jax import model as model_lib  # pylint: disable=g-import-not-at-top

    base = model_lib.build_model(name, 0, "bfloat16", 0)
    total = sum(x.size for x in jax.tree.leaves(model_lib.abstract_params(base, 8)))
    lora = model_lib.build_model(name, 0, "bfloat16", LORA_RANK)
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
                return estimate(total, trained, lora, config, chips=n, fsdp=fsdp,
                                batch_size=batch_size, maxlen=maxlen)
            n = smallest_slice(lambda n, f=per_chip: f(n).total_gb <= HBM_GB)
            cells.append("no slice" if n is None else f"v6e-{n}: {per_chip(n).total_gb:.1f} GB")
        lines.append(f"| {name} | {total / 1e9:.2f}B | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m trainers.gemma_jax.memory")
    p.add_argument("--batch_size", type=int, default=128)
    p.add_argument("--maxlen", type=int, default=256)
    args = p.parse_args()
    print(table(args.batch_size, args.maxlen))


if __name__ == "__main__":
    main()
