"""`serve:`: each bad input refused with one message naming the key, the value and what is allowed, before
anything is declared; what a good one declares (the vLLM Deployment and Service, the read-only export mount,
the server's identity and its one read grant)."""

from __future__ import annotations

import copy

import pytest

from admission import serving
from components.storage import export_read_condition
from core.names import export_prefix
from manifests.serving import MODEL_DIR, PORT
from stack import reader
from stack.problems import ConfigError
from stack.serving import PLACEHOLDER_DIGEST
from tests.support.pulumi_harness import ROOT

DIGEST = "sha256:" + "1" * 64


def values(stack: str = "a4") -> dict:
    return copy.deepcopy(reader.model_values(reader.file_values(stack, ROOT), stack))


def problems(mapping: dict) -> list[str]:
    with pytest.raises(ConfigError) as err:
        reader.validate(mapping)
    return err.value.problems


def served_dev(**run) -> dict:
    """The dev stack (one v6e chip) serving its run with vLLM's TPU image."""
    found = values("dev")
    found["runs"][0].update(run)
    found["serve"] = {"run": "gemma3-single-host", "pool": "v6e-1x1", "image": f"vllm/vllm-tpu@{DIGEST}"}
    return found


@pytest.mark.parametrize("update, expected", [
    ({"run": "nope"}, "serve.run: 'nope' is not a run of the stack; allowed: 'gemma4-sql'"),
    ({"pool": "system"}, "serve.pool: 'system' is the cluster's system node pool, which has no accelerator; "
                         "allowed: a single-host accelerator pool outside Kueue: 'a4'"),
    ({"pool": "zzz"}, "serve.pool: 'zzz' is not an accelerator pool of the stack; allowed: a single-host accelerator "
                      "pool outside Kueue: 'a4'"),
    ({"image": "vllm/vllm-openai:latest"}, "serve.image: 'vllm/vllm-openai:latest' must be pinned by digest, never a "
                                           "tag; allowed: vllm/vllm-openai@sha256:<64 hex digits>"),
    ({"image": None}, "serve.image: not set, is required"),
    ({"image": f"vllm/vllm-tpu@{DIGEST}"}, f"serve.image: 'vllm/vllm-tpu@{DIGEST}' is vLLM's TPU image, and pool "
                                          "'a4' is GPU; allowed: vllm/vllm-openai@sha256:<64 hex digits>"),
    ({"replicas": 3}, "serve.replicas: 3 servers need a VM each, and pool 'a4' holds at most 1; allowed: 0..1"),
    ({"maxModelLen": 10}, "serve.maxModelLen: 10 input should be greater than or equal to 256"),
])
def test_a_bad_serve_key_is_one_problem_naming_it(update, expected):
    found = values()
    found["serve"] = {k: v for k, v in {**found["serve"], **update}.items() if v is not None}
    [problem] = problems(found)
    assert problem.startswith(expected)


def test_the_served_run_must_export_a_whole_model():
    found = values()
    del found["runs"][0]["export"], found["runs"][0]["eval"]
    assert problems(found) == ["serve.run: 'gemma4-sql' has no `export:`, and the server loads the run's export; "
                               "allowed: a run with `export:` (none in this stack), or `export: {format: huggingface}` "
                               "on run 'gemma4-sql'"]
    found = values()
    found["runs"][0]["export"]["merge"] = False
    assert problems(found) == ["serve.run: 'gemma4-sql' exports its LoRA adapter alone (`export.merge: false`), and "
                               "the server loads a whole model; allowed: `export.merge: true` on run 'gemma4-sql'"]


def test_a_multi_host_or_kueue_pool_is_refused():
    found = values("tpu-queued")
    found["runs"][1]["export"] = {"format": "huggingface"}
    found["serve"] = {"run": "gemma3-single-host", "pool": "queued-v6e-2x4", "image": f"vllm/vllm-tpu@{DIGEST}"}
    [problem] = problems(found)
    assert problem.startswith("serve.pool: 'queued-v6e-2x4' is tpu-v6e 2x4 on 2x ct6e-standard-4t x1: a multi-host "
                              "slice, and vLLM on GKE serves from one host; allowed: a single-host accelerator pool "
                              "outside Kueue: 'v6e-1x1'")


def test_a_model_too_large_for_the_pool_s_chips_or_a_context_too_long_is_refused():
    assert serving.serving_problems(reader.validate(served_dev())) == []
    [memory] = serving.serving_problems(reader.validate(served_dev(model="gemma3-27b")))
    assert str(memory).startswith("serve.pool: 'v6e-1x1' serving run 'gemma3-single-host': needs 57.2 GiB per chip "
                                  "for model gemma3-27b")
    assert "a chip of pool 'v6e-1x1' offers 32.00 GiB" in str(memory)
    found = values()
    found["serve"]["maxModelLen"] = 1_000_000
    assert [str(p) for p in serving.serving_problems(reader.validate(found))] == [
        "serve.maxModelLen: 1000000 is longer than model gemma4-31b's context of 262144 tokens; allowed: 256..262144"]


def test_the_shipped_placeholder_digest_is_refused_for_up_only():
    shipped = values()
    reader.validate(shipped)  # plan and preview take it
    [problem] = reader.serve_placeholder(shipped["serve"])
    assert (problem.key, problem.value) == ("serve.image", f"vllm/vllm-openai@{PLACEHOLDER_DIGEST}")
    assert reader.serve_placeholder({**shipped["serve"], "image": f"vllm/vllm-openai@{DIGEST}"}) == []


def test_the_server_loads_the_export_read_only_on_the_pool_s_chips_under_its_own_account():
    config = reader.validate(values())
    objects = serving.serve_manifests(config)
    deployment = objects["deployment-serve-gemma4-sql"]
    pod = deployment["spec"]["template"]["spec"]
    server = next(c for c in pod["containers"] if c["name"] == "vllm")
    contract = config.contracts()["a4"]
    # The pool's accelerator, exactly: every chip of the host, in requests and limits.
    assert server["resources"]["requests"][contract.resource_name] == str(contract.chips_per_host) == "8"
    assert server["resources"]["limits"] == server["resources"]["requests"]
    assert server["args"][server["args"].index("--tensor-parallel-size") + 1] == "8"
    assert server["args"][server["args"].index("--model") + 1] == MODEL_DIR
    assert server["image"].startswith("vllm/vllm-openai@sha256:")
    # The export alone, read-only, through the FUSE CSI driver; the account is the server's, not the trainer's.
    [model] = [v for v in pod["volumes"] if v["name"] == "model"]
    assert model["csi"]["readOnly"] is True
    assert f"only-dir={export_prefix('a4', 'gemma4-sql')}" in model["csi"]["volumeAttributes"]["mountOptions"]
    assert all(m["readOnly"] for c in [*pod["initContainers"], server] for m in c["volumeMounts"] if m["name"] == "model")
    assert pod["serviceAccountName"] == config.server_account != config.trainer_account
    assert pod["nodeSelector"] == contract.pod_node_selector
    # Probes sized for the model's load: the startup budget covers its ~62 GB read at 100 MiB/s and the warm-up.
    weights = serving.serve_facts(config).weights_bytes
    assert 60e9 < weights < 64e9
    startup = server["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= weights / (100 * 2**20) + 600
    assert server["readinessProbe"]["httpGet"]["path"] == "/health"
    service = objects["service-serve-gemma4-sql"]
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert service["spec"]["ports"][0]["port"] == PORT


def test_the_server_s_grant_reads_the_export_and_lists_the_bucket_only():
    condition = export_read_condition("b", "exports/a4/gemma4-sql")
    assert condition == ('resource.type == "storage.googleapis.com/Bucket" || '
                         'resource.name.startsWith("projects/_/buckets/b/objects/exports/a4/gemma4-sql/") || '
                         'resource.name.startsWith("projects/_/buckets/b/folders/exports/a4/gemma4-sql/")')


def test_no_serve_key_declares_no_server():
    config = reader.validate(values("dev"))
    assert config.serve is None and serving.serve_manifests(config) == {} and serving.serving_problems(config) == []
