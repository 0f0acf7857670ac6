"""Secrets and sizes of what a run's process gets: a credential in `env:` comes from a Secret reference
(valueFrom.secretKeyRef, never a value in the stack file, the state or the JobSet); the Hugging Face token goes
only to the pods that ask for it; arguments, environment and the JobSet stay within what Linux and etcd take."""

from __future__ import annotations

import copy
import json

import pytest

from core.syntax import ARG_STRING_MAX_BYTES, OBJECT_MAX_BYTES
from stack import reader
from stack.problems import ConfigError
from tests.support import schemas
from tests.support.pulumi_harness import ROOT, declared_before_error, run_stack

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
RUNS = "gke-finetune:runs"
SPC = "kubernetes:secrets-store.csi.x-k8s.io/v1:SecretProviderClass"


def _runs(stack: str) -> list[dict]:
    return copy.deepcopy(reader.file_values(stack, ROOT)[RUNS])


def _container(deployment, run: str) -> dict:
    [jobset] = [j for j in deployment.of_type(JOBSET) if j.inputs["metadata"]["name"] == run]
    return jobset.inputs["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]


def _refused(stack: str, runs: list[dict]) -> list[str]:
    declared, err = declared_before_error(stack, overrides={RUNS: runs})
    assert isinstance(err, ConfigError) and declared.resources == [], err
    return err.problems


def test_a_credential_in_env_comes_from_a_secret_reference():
    runs = _runs("dev")
    runs[0]["env"] = {"WANDB_API_KEY": {"secret": "wandb", "key": "api-key"}, "WANDB_PROJECT": "tiny",
                      "MAX_TOKENS": "512"}
    d = run_stack("dev", overrides={RUNS: runs})
    env = {e["name"]: e for e in _container(d, runs[0]["name"])["env"]}
    assert env["WANDB_API_KEY"] == {"name": "WANDB_API_KEY",
                                    "valueFrom": {"secretKeyRef": {"name": "wandb", "key": "api-key"}}}
    assert env["WANDB_PROJECT"] == {"name": "WANDB_PROJECT", "value": "tiny"} and env["MAX_TOKENS"]["value"] == "512"
    [jobset] = d.of_type(JOBSET)
    assert schemas.manifest_errors(jobset.inputs) == []


@pytest.mark.parametrize("env, expected", [
    ({"WANDB_API_KEY": "d41d8cd98f00b204"}, "runs[0].env.WANDB_API_KEY: '[plain text]' on run 'gemma3-single-host': "
                                            "WANDB_API_KEY looks like a credential"),
    ({"HF_TOKEN": "hf_abc"}, "runs[0].env.HF_TOKEN: '[plain text]'"),
    ({"DB_PASSWORD": "x"}, "runs[0].env.DB_PASSWORD: '[plain text]'"),
    ({"K": {"secret": "Not_A_Name", "key": "k"}}, "runs[0].env.K.secret: 'Not_A_Name' on run 'gemma3-single-host' is "
                                                  "not a DNS-1123 subdomain"),
    ({"K": {"secret": "s", "key": "a/b"}}, "runs[0].env.K.key: 'a/b' on run 'gemma3-single-host' is not a key"),
    ({"K": {"secret": "s"}}, "runs[0].env.K.key: not set, and it is required"),
    ({"K": {"secret": "s", "key": "k", "optional": True}}, "runs[0].env.K.optional: true is an unknown key; "
                                                           "allowed: secret, key"),
])  # fmt: skip
def test_env_values_a_secret_must_not_be_are_refused_and_never_shown(env, expected):
    runs = _runs("dev")
    runs[0]["env"] = env
    problems = _refused("dev", runs)
    assert any(p.startswith(expected) for p in problems), problems
    assert not any(v in " ".join(problems) for v in ("d41d8cd98f00b204", "hf_abc"))


def test_the_token_goes_only_to_a_run_of_ones_own_container_that_asks():
    runs = _runs("tpu-queued")
    own = next(r for r in runs if not r.get("trainer"))
    quiet = run_stack("tpu-queued", overrides={RUNS: runs})
    assert not quiet.of_type(SPC) and "huggingface" not in json.dumps(_container(quiet, own["name"]))
    own["hfToken"] = True
    asks = run_stack("tpu-queued", overrides={RUNS: runs})
    assert len(asks.of_type(SPC)) == 1 and "HF_TOKEN_PATH" in json.dumps(_container(asks, own["name"]))
    others = [r["name"] for r in runs if r is not own]
    assert all("HF_TOKEN_PATH" not in json.dumps(_container(asks, name)) for name in others)
    own["hfToken"] = "yes"
    problems = _refused("tpu-queued", runs)
    assert any("hfToken: 'yes' is text; allowed: true or false" in p for p in problems), problems


@pytest.mark.parametrize("key, change", [
    ("args[1]", {"args": ["--maxlen", "x" * (ARG_STRING_MAX_BYTES + 1)]}),
    ("systemPrompt", {"format": "conversational", "system_prompt": "é" * 70000}),
    ("env.NOTES", {"env": {"NOTES": "n" * ARG_STRING_MAX_BYTES}}),
    ("eval.prompts", {"eval": {"prompts": ["p" * (ARG_STRING_MAX_BYTES - 3)]}}),  # one argument: their JSON
])  # fmt: skip
def test_a_string_longer_than_a_process_takes_is_refused_naming_its_key(key, change):
    runs = _runs("dev")
    runs[0].update({k if k != "system_prompt" else "systemPrompt": v for k, v in change.items()})
    problems = _refused("dev", runs)
    assert any(p.startswith(f"runs[0].{key}: '[") and "Linux MAX_ARG_STRLEN: 131071 bytes" in p for p in problems), \
        problems


def test_the_longest_string_a_process_takes_passes():
    runs = _runs("dev")
    runs[0]["env"] = {"NOTES": "n" * (ARG_STRING_MAX_BYTES - len("NOTES="))}
    assert run_stack("dev", overrides={RUNS: runs}).of_type(JOBSET)


def test_a_jobset_larger_than_etcd_stores_is_refused_before_anything_is_declared():
    runs = _runs("dev")
    chunk = "a" * (ARG_STRING_MAX_BYTES - 16)  # each NOTE_<i>=<chunk> within the limit
    runs[0]["env"] = {f"NOTE_{i}": chunk for i in range(OBJECT_MAX_BYTES // ARG_STRING_MAX_BYTES + 1)}
    problems = _refused("dev", runs)
    assert any("(the whole object)" in p and f"exceed the {OBJECT_MAX_BYTES} bytes etcd stores" in p
               for p in problems), problems


def test_this_machines_kernel_takes_the_longest_string_and_not_one_byte_more():
    """The limit as Linux applies it (execve's E2BIG), on this machine's kernel, as on a node's."""
    import errno  # noqa: PLC0415
    import subprocess  # noqa: PLC0415

    assert subprocess.run(["true", "x" * ARG_STRING_MAX_BYTES], check=False).returncode == 0
    with pytest.raises(OSError) as err:
        subprocess.run(["true", "x" * (ARG_STRING_MAX_BYTES + 1)], check=False)
    assert err.value.errno == errno.E2BIG


@pytest.mark.parametrize("key, value", [("merge", "yes"), ("compareBase", "on")])
def test_an_export_or_eval_flag_written_as_text_is_refused(key, value):
    runs = _runs("dev")
    runs[0]["export"] = {**runs[0]["export"], **({"merge": value} if key == "merge" else {})}
    if key == "compareBase":
        runs[0]["eval"] = {"compareBase": value}
    problems = _refused("dev", runs)
    assert any(f"{key}: {value!r} is text; allowed: true or false" in p for p in problems), problems
