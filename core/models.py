"""The Gemma models a run may name (`model:`), and how each trainer is told which one. Pure data.

The names are the JAX trainer's own (trainers/gemma_jax/flags.py MODEL_NAMES, less its tiny test
models); the GPU trainer loads the instruction-tuned checkpoint of the same size from the Hugging
Face Hub (https://huggingface.co/google), and FSDP wraps each of its decoder layers, whose class
is Gemma 3's or Gemma 4's (trainers/trl_gpu/README.md, "FSDP and accelerate"). What each model
holds (parameters, dimensions) is in trainers/gemma_jax/model_shapes.json, written from gemma's
own configs, which the memory fit reads (admission/accelerator_memory.py).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GemmaModel:
    name: str
    hub_id: str  # the instruction-tuned checkpoint on the Hugging Face Hub
    decoder_layer: str  # the transformers class FSDP wraps, one unit per decoder layer
    context_tokens: int  # the longest sequence the model takes (a server's --max-model-len at most)


def _family(name: str) -> str:
    return "Gemma3DecoderLayer" if name.startswith("gemma3") else "Gemma4TextDecoderLayer"


_HUB = {
    "gemma3-270m": "google/gemma-3-270m-it",
    "gemma3-1b": "google/gemma-3-1b-it",
    "gemma3-4b": "google/gemma-3-4b-it",
    "gemma3-12b": "google/gemma-3-12b-it",
    "gemma3-27b": "google/gemma-3-27b-it",
    "gemma4-e2b": "google/gemma-4-E2B-it",
    "gemma4-e4b": "google/gemma-4-E4B-it",
    "gemma4-31b": "google/gemma-4-31B-it",
    "gemma4-26b-a4b": "google/gemma-4-26B-A4B-it",
}
# Context windows: Gemma 3 270M and 1B take 32K tokens, 4B and larger 128K
# (https://ai.google.dev/gemma/docs/core/model_card_3, "Inputs and outputs"); Gemma 4's small models
# (E2B, E4B) 128K, its medium ones (26B A4B, 31B) 256K (https://ai.google.dev/gemma/docs/core,
# "Capabilities", read 2026-12-05).
_K = 1024
_CONTEXT = {"gemma3-270m": 32 * _K, "gemma3-1b": 32 * _K, "gemma3-4b": 128 * _K, "gemma3-12b": 128 * _K,
            "gemma3-27b": 128 * _K, "gemma4-e2b": 128 * _K, "gemma4-e4b": 128 * _K, "gemma4-31b": 256 * _K,
            "gemma4-26b-a4b": 256 * _K}
MODELS: dict[str, GemmaModel] = {n: GemmaModel(n, hub, _family(n), _CONTEXT[n]) for n, hub in _HUB.items()}


def by_hub_id(model_id: str) -> GemmaModel | None:
    """The model a Hub id names (case as the Hub ignores it), or None."""
    return next((m for m in MODELS.values() if m.hub_id.lower() == model_id.lower()), None)
