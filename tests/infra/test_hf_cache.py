"""The Hugging Face cache of a trl-gpu pod: an emptyDir on the node's (local SSD) ephemeral storage."""

from __future__ import annotations

import pytest

from tests.infra.test_manifests import CASES, pod, trainer
from workloads import examples, trainers
from workloads.spec import validate_runs


@pytest.mark.parametrize("stack,run,contract,manifest", CASES)
def test_gpu_pods_cache_the_hub_in_a_sized_empty_dir(stack, run, contract, manifest):
    container = trainer(manifest)
    volumes = {v["name"]: v for v in pod(manifest)["spec"]["volumes"]}
    env = {e["name"]: e.get("value") for e in container["env"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    requests = container["resources"]["requests"]
    if run.trainer == "trl-gpu":
        assert volumes["hf-cache"] == {"name": "hf-cache", "emptyDir": {"sizeLimit": trainers.HF_CACHE_SIZE}}
        assert mounts["hf-cache"] == env["HF_HOME"] == trainers.HF_CACHE_DIR
        assert requests["ephemeral-storage"] == trainers.HF_CACHE_SIZE
        assert "ephemeral-storage" not in container["resources"]["limits"]
    else:
        assert "hf-cache" not in volumes and "HF_HOME" not in env
        assert "ephemeral-storage" not in requests


def test_the_cache_holds_a_31b_model_with_room_to_spare():
    size_gib = int(trainers.HF_CACHE_SIZE.removesuffix("Gi"))
    assert size_gib * 2**30 > 4 * 62e9  # gemma-4-31B-it in bf16 is ~62 GB


def test_a_run_may_not_move_the_cache():
    gpu = examples.RUNS[3]
    [message] = validate_runs([gpu.model_copy(update={"env": {"HF_HOME": "/tmp"}})], examples.CONTRACTS)
    assert "env HF_HOME is set by the platform" in message
