"""Model registry, tokenizer and pretrained-params loading.

Every size goes through the same code: a `gemma` model class, its matching
tokenizer class and `gm.ckpts.load_params`. `tiny` is the Gemma 3 270M class
with a few-layer config and the vocabulary of a local tokenizer, so tests and
laptops run the production path end to end.
"""

from __future__ import annotations

import dataclasses
from gemma import gm
from gemma import peft
import jax
import jax.numpy as jnp

from gemma.gm.nn.gemma4 import _modules as gemma4_modules

from trainers.gemma_jax import lora as lora_lib
from trainers.gemma_jax import pretrained as pretrained_lib


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """How to build one size: gemma class, _PT checkpoint, tokenizer class."""

    model_cls: str
    checkpoint: str | None  # attribute of gm.ckpts.CheckpointPath
    tokenizer_cls: str
    # Gemma 3 4B+ carry a vision tower; fine-tuning on text skips it.
    text_only: bool = False


MODELS: dict[str, ModelSpec] = {  # keys: flags.MODEL_NAMES
    "gemma3-270m": ModelSpec("Gemma3_270M", "GEMMA3_270M_PT", "Gemma3Tokenizer"),
    "gemma3-1b": ModelSpec("Gemma3_1B", "GEMMA3_1B_PT", "Gemma3Tokenizer"),
    "gemma3-4b": ModelSpec("Gemma3_4B", "GEMMA3_4B_PT", "Gemma3Tokenizer", True),
    "gemma3-12b": ModelSpec("Gemma3_12B", "GEMMA3_12B_PT", "Gemma3Tokenizer", True),
    "gemma3-27b": ModelSpec("Gemma3_27B", "GEMMA3_27B_PT", "Gemma3Tokenizer", True),
    "gemma4-e2b": ModelSpec("Gemma4_E2B", "GEMMA4_E2B_PT", "Gemma4Tokenizer", True),
    "gemma4-e4b": ModelSpec("Gemma4_E4B", "GEMMA4_E4B_PT", "Gemma4Tokenizer", True),
    "gemma4-31b": ModelSpec("Gemma4_31B", "GEMMA4_31B_PT", "Gemma4Tokenizer", True),
    "gemma4-26b-a4b": ModelSpec("Gemma4_26B_A4B", "GEMMA4_26B_A4B_PT", "Gemma4Tokenizer", True),
    "tiny": ModelSpec("Gemma3_270M", None, "Gemma3Tokenizer"),
    "tiny-gemma4": ModelSpec("Gemma4_E2B", None, "SmallVocabTokenizer", True),
}


@dataclasses.dataclass(frozen=True)
class SmallVocabTokenizer(gm.text.Gemma3Tokenizer):
    """The tiny Gemma 4 layout on a test's own small SentencePiece vocabulary, with Gemma 3's
    special tokens. gemma's Sampler refuses a tokenizer whose VERSION differs from the model's
    (gm/text/_sampler.py, "Incompatible model and tokenizer"), and Gemma4Tokenizer needs the
    real 262k vocabulary: VERSION 0 says "no particular Gemma version", which it accepts."""

    VERSION = 0


def resolve_pretrained(model: str, pretrained: str | None) -> str | None:
    """'default' -> the model's _PT checkpoint; 'none' -> None (random init)."""
    if pretrained is None or pretrained.lower() == "none":
        return None
    if pretrained == "default":
        ckpt = MODELS[model].checkpoint
        return getattr(gm.ckpts.CheckpointPath, ckpt) if ckpt else None
    return pretrained


def load_tokenizer(model: str, path: str | None) -> gm.text.Tokenizer:
    """The model's gemma tokenizer class, optionally on a local vocab file."""
    name = MODELS[model].tokenizer_cls
    cls = SmallVocabTokenizer if name == SmallVocabTokenizer.__name__ else getattr(gm.text, name)
    return cls(path) if path else cls()


# The dimensions both tiny test models share: two layers (one sliding-window, one global) small
# enough to train in seconds on a CPU.
TINY_DIMENSIONS = dict(embed_dim=64, hidden_dim=128, num_heads=2, head_dim=32, num_kv_heads=1, sliding_window_size=32)


def tiny_config(vocab_size: int) -> gm.nn.config.TransformerConfig:
    """Two layers (one sliding-window, one global) of the Gemma 3 layout."""
    local, global_ = (gm.nn.AttentionType.LOCAL_SLIDING, gm.nn.AttentionType.GLOBAL)
    return dataclasses.replace(gm.nn.Gemma3_270M.config, num_embed=vocab_size, attention_types=(local, global_),
                               **TINY_DIMENSIONS)


def tiny_gemma4_config(vocab_size: int):
    """Two layers of the Gemma 4 E2B layout (sliding + global with its own
    key size, per-layer input embeddings), no KV sharing, text only."""
    local, global_ = gemma4_modules.AttentionType.LOCAL_SLIDING, gemma4_modules.AttentionType.GLOBAL
    return dataclasses.replace(
        gm.nn.Gemma4_E2B.config,
        num_embed=vocab_size,
        attention_types=(local, global_),
        global_key_size=48,
        per_layer_input_dim=8,
        kv_cache_sharing_config=None,
        override_kv_shared_ffw_hidden=None,
        vision_encoder=None,
        audio_encoder=None,
        **TINY_DIMENSIONS,
    )


def is_gemma4(name: str) -> bool:
    return MODELS[name].model_cls.startswith("Gemma4")


def build_model(name: str, vocab_size: int, param_dtype: str, lora_rank: int):
    """Instantiates the flax module (LoRA-wrapped when lora_rank > 0)."""
    spec = MODELS[name]
    dtype = jnp.dtype(param_dtype)
    kwargs = {"dtype": dtype}
    if name == "tiny":
        kwargs["config"] = tiny_config(vocab_size)
    if name == "tiny-gemma4":
        kwargs["config"] = tiny_gemma4_config(vocab_size)
    if spec.text_only:
        kwargs["text_only"] = True
    model = getattr(gm.nn, spec.model_cls)(**kwargs)
    if lora_rank:
        wrapper = lora_lib.Gemma4LoRA if is_gemma4(name) else gm.nn.LoRA
        model = wrapper(rank=lora_rank, model=model, dtype=dtype)
    return model


def split_trainable(params, lora: bool):
    """(trainable, frozen): LoRA trains only the 'lora' branches."""
    if not lora:
        return params, {}
    original, lora_params = peft.split_params(params)
    return lora_params, _drop_empty(original)


def _drop_empty(tree):
    """split_params leaves {} where a LoRA wrapper held only 'lora'; the
    checkpoint has no such entries."""
    if not isinstance(tree, dict):
        return tree
    out = {k: _drop_empty(v) for k, v in tree.items()}
    return {k: v for k, v in out.items() if not (isinstance(v, dict) and not v)}


def merge_params(trainable, frozen, lora: bool, dtype=None):
    """Full params for the model; `dtype` casts the trained (master) copy to
    the model's compute dtype (a no-op when they match)."""
    if dtype is not None:
        trainable = jax.tree.map(lambda x: x.astype(dtype), trainable)
    return peft.merge_params(frozen, trainable) if lora else trainable


def with_dtype(abstract_tree, dtype):
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, jnp.dtype(dtype)), abstract_tree)


def abstract_params(model, maxlen: int):
    """Shapes/dtypes of model.init, without allocating anything."""
    tokens = jax.ShapeDtypeStruct((1, maxlen), jnp.int32)
    return jax.eval_shape(
        lambda rng, t: model.init(rng, t)["params"],
        jax.ShapeDtypeStruct((2,), jnp.uint32),
        tokens,
    )


def init_params(model, maxlen: int, seed: int, shardings, lora: bool, frozen_only: bool = False):
    """Random init, directly into the target sharding.

    Returns (trainable, frozen). Only the requested part leaves the jit, so
    XLA drops the initialisers of the other part.
    """

    def init(rng):
        params = model.init(rng, jnp.zeros((1, maxlen), jnp.int32))["params"]
        trainable, frozen = split_trainable(params, lora)
        return frozen if frozen_only else trainable

    out = jax.jit(init, out_shardings=shardings)(jax.random.key_data(jax.random.key(seed)))
    return out


def load_pretrained(path: str, abstract_base, shardings):
    """Base params from a gemma Orbax checkpoint (any of gemma's layouts),
    read straight into their shards and cast to the model's dtypes; a
    vision/audio tower the text-only model lacks is never read
    (pretrained.py)."""
    return pretrained_lib.load(path, abstract_base, shardings)


def load_hf(path: str, model, abstract_base, shardings):
    """Base params from a Hugging Face directory, straight into their shards
    (every process reads the files and keeps only its own shards)."""
    from trainers.gemma_jax import hf  # pylint: disable=g-import-not-at-top

    config = getattr(model, "model", model).config
    hf_config, tensors = hf.read_dir(path)
    codec = hf.codec(config)
    problems = codec.config_problems(hf_config, config)
    if problems:
        raise ValueError("; ".join(problems))
    dtypes = jax.tree.leaves(abstract_base)[0].dtype
    tree = codec.to_gemma(tensors, config, dtypes)
    return jax.tree.map(
        lambda a, s, x: jax.make_array_from_callback(a.shape, s, lambda idx: x[idx]),
        abstract_base,
        shardings,
        tree,
    )
