"""The tests' torch is the image's: the package index's torch, itself the CUDA 13.0 build (docker/trl-gpu/Dockerfile)."""

import re
from pathlib import Path

import torch

REQUIREMENTS = Path(__file__).resolve().parents[2] / "trainers" / "trl_gpu" / "requirements.txt"


def test_the_package_index_torch_is_the_pinned_cuda_13_build():
    pinned = re.search(r"^torch==([^\s;#]+)", REQUIREMENTS.read_text(), re.MULTILINE).group(1)
    assert torch.__version__.split("+")[0] == pinned
    # What the image's build checks too: a CUDA build, CUDA 13 (Blackwell's sm_100 among its targets).
    assert (torch.version.cuda or "").startswith("13."), torch.version.cuda
    assert "sm_100" in torch.cuda.get_arch_list(), torch.cuda.get_arch_list()
