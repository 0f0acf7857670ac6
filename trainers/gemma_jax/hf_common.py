"""What the Hugging Face codecs of every Gemma family share: the safetensors format, the layer
norms' names, the config.json fields common to Gemma 3 and Gemma 4 text configs, name prefixes.

hf.py (Gemma 3, and the choice of codec) and hf_gemma4.py (Gemma 4) both
import this module; it imports neither.

The safetensors format (https://huggingface.co/docs/safetensors) is an 8-byte
little-endian header size, a JSON header {name: {dtype, shape,
data_offsets}}, then the raw little-endian arrays; it is read and written
here with numpy (bfloat16 through ml_dtypes, a jax dependency).
"""

from __future__ import annotations

import json
import os
import struct

import ml_dtypes
import numpy as np

_DTYPES = {
    "F32": np.dtype(np.float32),
    "F16": np.dtype(np.float16),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "I64": np.dtype(np.int64),
    "I32": np.dtype(np.int32),
}
_NAMES = {v: k for k, v in _DTYPES.items()}
# transformers' layer norm names -> gemma's.
NORMS = {
    "input_layernorm": "pre_attention_norm",
    "post_attention_layernorm": "post_attention_norm",
    "pre_feedforward_layernorm": "pre_ffw_norm",
    "post_feedforward_layernorm": "post_ffw_norm",
}
def read_safetensors(path: str) -> dict[str, np.ndarray]:
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
        base = 8 + size
        out = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            begin, end = info["data_offsets"]
            f.seek(base + begin)
            raw = f.read(end - begin)
            out[name] = np.frombuffer(raw, _DTYPES[info["dtype"]]).reshape(info["shape"])
    return out


def write_safetensors(path: str, tensors: dict[str, np.ndarray]) -> None:
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    arrays = {k: np.ascontiguousarray(v) for k, v in sorted(tensors.items())}
    for name, a in arrays.items():
        header[name] = {
            "dtype": _NAMES[a.dtype],
            "shape": list(a.shape),
            "data_offsets": [offset, offset + a.nbytes],
        }
        offset += a.nbytes
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob)
        for a in arrays.values():
            f.write(a.tobytes())


def read_dir(directory: str) -> tuple[dict, dict[str, np.ndarray]]:
    """(config.json, every tensor of every *.safetensors file)."""
    with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    tensors = {}
    for name in sorted(os.listdir(directory)):
        if name.endswith(".safetensors"):
            tensors.update(read_safetensors(os.path.join(directory, name)))
    return config, tensors


def layer_types(cfg) -> list[str]:
    """transformers' name of each layer's attention type."""
    return ["full_attention" if t.name == "GLOBAL" else "sliding_attention" for t in cfg.attention_types]


def text_config_fields(cfg) -> dict:
    """The config.json fields Gemma 3 and Gemma 4 text configs share, from gemma's TransformerConfig."""
    return {
        "vocab_size": cfg.num_embed,
        "hidden_size": cfg.embed_dim,
        "intermediate_size": cfg.hidden_dim,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_heads,
        "num_key_value_heads": cfg.num_kv_heads,
        "head_dim": cfg.head_dim,
        "sliding_window": cfg.sliding_window_size,
        "layer_types": layer_types(cfg),
    }


def strip_prefix(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Names without the 'model.' (or 'model.language_model.') prefix."""
    out = {}
    for name, a in tensors.items():
        for prefix in ("model.language_model.", "model."):
            if name.startswith(prefix):
                name = name[len(prefix) :]
                break
        out[name] = a
    return out


def cast(tree, dtype):
    if isinstance(tree, dict):
        return {key: cast(v, dtype) for key, v in tree.items()}
    return np.asarray(tree).astype(dtype)
