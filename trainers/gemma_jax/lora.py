"""LoRA adapters on Gemma 4's own layers.

gemma 4.0.1's `gm.nn.LoRA` (gm/nn/_lora.py) swaps only the module classes in
its `_SUPPORTED_MODULES` (flax's Dense/Einsum/DenseGeneral and Gemma 2/3's
`gm.nn._layers.Einsum`) for adapters; Gemma 4 builds its projections from
its own `gm.nn.gemma4._layers.Einsum` class, so `gm.nn.LoRA` around a Gemma 4
model adds nothing. `Gemma4LoRA` intercepts the same way (flax module
interception through `peft.ModuleInterceptor`) and wraps Gemma 4's Einsum
in gemma's own `_LoRAEinsum` (output = frozen einsum + x·A·B, B = 0 at
init), which needs only the wrapped module's `shape`, `weight_name` and
`(eqn, x)` call, all of which Gemma 4's Einsum has.

Adapted: the attention projections (q, kv / k, output) and the dense MLP
(gating and down projection) of every block, as LoRA does on Gemma 3. Not
adapted: embedder and per-layer-input projections, and the mixture-of-experts
router and experts (their batched expert einsums are not plain x·W).
"""

from __future__ import annotations

import functools

from flax import linen as nn
from gemma import gm
from gemma import peft
from gemma.peft import _einsum_utils
from gemma.gm.nn import _lora as gemma_lora
from gemma.gm.nn.gemma4 import _layers as gemma4_layers
from gemma.gm.nn.gemma4 import _modules as gemma4_modules
import numpy as np

_ADAPTED_PARENTS = (gemma4_modules.Attention, gemma4_modules.FeedForward)


def _replace(module: nn.Module, *, rank: int, dtype) -> nn.Module:
    if not (
        type(module) is gemma4_layers.Einsum  # pylint: disable=unidiomatic-typecheck
        and isinstance(module.parent, _ADAPTED_PARENTS)
    ):
        return module
    # FeedForward shares its scope with both of its Einsums, so the two
    # wrappers need distinct names (the same naming as gm.nn.LoRA's, hence
    # the same parameter paths as a Gemma 3 LoRA tree).
    name = None if module.weight_name == "w" else f"_LoRAEinsum_{module.weight_name}"
    return gemma_lora._LoRAEinsum(  # pylint: disable=protected-access
        name=name, rank=rank, dtype=dtype, wrapped=module
    )


class Gemma4LoRA(gm.nn.LoRA):
    """`gm.nn.LoRA` for Gemma 4 models (same parameters layout: every
    adapter is a `lora` subtree holding `a` and `b`)."""

    @nn.compact
    def __call__(self, *args, **kwargs):
        replace = functools.partial(_replace, rank=self.rank, dtype=self.dtype)
        with peft.ModuleInterceptor(replace):
            return self.model(*args, **kwargs)


# The einsum each adapted weight is called with (gemma 4.0.1: gm/nn/_modules.py
# for Gemma 3, gm/nn/gemma4/_modules.py for Gemma 4; the same strings).
EINSUMS = {
    "q_einsum": "BTD,NDH->BTNH",
    "qkv_einsum": "BTD,SNDH->SBTNH",
    "kv_einsum": "BSD,CKDH->CBSKH",
    "k_einsum": "BSD,KDH->BSKH",
    "attn_vec_einsum": "BTNH,NHD->BTD",
    "gating_einsum": "...F,NHF->...NH",
    "linear": "...H,HF->...F",
}


def _delta(weight_name: str, a, b):
    """A·B in the layout of the wrapped weight: the adapter computes
    x·A·B with A's axes the weight's input axes + rank and B's rank +
    output axes (peft._einsum_utils.get_lora_einsum_str_and_shapes)."""
    eqn = EINSUMS[weight_name]
    weights = eqn.split(",")[1].split("->")[0]
    lora_eqn, _, _ = _einsum_utils.get_lora_einsum_str_and_shapes(
        einsum_str=eqn, weights_shape=(1,) * len(weights), rank=1
    )
    a_str, b_str = lora_eqn.split("->")[0].split(",")[1:]
    return np.einsum(f"{a_str},{b_str}->{weights}", np.asarray(a, np.float32), np.asarray(b, np.float32))


def merge(base: dict, adapters: dict) -> dict:
    """The base params with every adapter folded in (W + A·B), float32.

    Adapter paths, as gm.nn.LoRA and Gemma4LoRA name them:
    attn/<proj>/_LoRAEinsum_0/lora/{a,b} for attn/<proj>/w, and
    mlp/_LoRAEinsum_<name>/lora/{a,b} for mlp/<name>. An adapter with no
    weight to fold into raises ValueError.
    """
    used: list[str] = []
    out = _merge(base, adapters, "", used)
    count = len(list(_lora_paths(adapters)))
    if len(used) != count:
        raise ValueError(f"{count - len(used)} adapters match no base weight")
    return out


def _lora_paths(tree, prefix=""):
    for key, value in tree.items():
        if key == "lora":
            yield prefix
        elif isinstance(value, dict):
            yield from _lora_paths(value, f"{prefix}/{key}")


def _merge(base: dict, adapters: dict, name: str, used: list[str]) -> dict:
    out = {}
    for key, value in base.items():
        if isinstance(value, dict):
            out[key] = _merge(value, adapters.get(key, {}), key, used)
            continue
        weight = np.asarray(value, np.float32)
        if f"_LoRAEinsum_{key}" in adapters:  # FeedForward's shared scope
            ab, weight_name = adapters[f"_LoRAEinsum_{key}"]["lora"], key
        elif key == "w" and "_LoRAEinsum_0" in adapters:  # an Einsum module's own
            ab, weight_name = adapters["_LoRAEinsum_0"]["lora"], name
        else:
            out[key] = weight
            continue
        out[key] = weight + _delta(weight_name, ab["a"], ab["b"])
        used.append(f"{name}/{key}")
    return out
