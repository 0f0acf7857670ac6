"""The Hugging Face cache of a trl-gpu pod: an emptyDir on the node's (local SSD) ephemeral storage."""

from __future__ import annotations

import pytest

from tests.manifests.test_manifests import CASES, pod, trainer
from core.trainers import TRAINERS
from manifests import pod as pod_parts
from stack.runs import run_problems
from tests.support import examples


@pytest.mark.parametrize("stack,run,contract,manifest", CASES)
def test_gpu_pods_cache_the_hub_in_a_sized_empty_dir(stack, run, contract, manifest):
    container = trainer(manifest)
    volumes = {v["name"]: v for v in pod(manifest)["spec"]["volumes"]}
    env = {e["name"]: e.get("value") for e in container["env"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    requests = container["resources"]["requests"]
    if run.trainer == "trl-gpu":
        assert volumes["hf-cache"] == {"name": "hf-cache", "emptyDir": {"sizeLimit": TRAINERS["trl-gpu"].hf_cache_size}}
        assert mounts["hf-cache"] == env["HF_HOME"] == pod_parts.HF_CACHE_DIR
        # The cache's emptyDir counts against the pod's ephemeral-storage limits: the trainer's holds it.
        assert requests["ephemeral-storage"] == "310Gi" == pod_parts.scratch_storage(TRAINERS["trl-gpu"])
        assert container["resources"]["limits"] == requests
    else:
        assert "hf-cache" not in volumes and "HF_HOME" not in env
        assert requests["ephemeral-storage"] == pod_parts.SCRATCH_STORAGE  # logs and scratch only


def test_the_cache_holds_a_31b_model_with_room_to_spare():
    size_gib = int(TRAINERS["trl-gpu"].hf_cache_size.removesuffix("Gi"))
    assert size_gib * 2**30 > 4 * 62e9  # gemma-4-31B-it in bf16 is ~62 GB


def test_a_run_may_not_move_the_cache():
    gpu = examples.RUNS[3]
    [message] = map(str, run_problems([gpu.model_copy(update={"env": {"HF_HOME": "/tmp"}})], examples.CONTRACTS))
    assert "env HF_HOME is set by the platform" in message
