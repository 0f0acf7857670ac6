"""A run's data settings (format, columns, promptTemplate, systemPrompt, loss) and runs of one's own
container: each bad input refused before anything is declared, naming the key, the value and what is
allowed; what a good one puts in its JobSet."""

from __future__ import annotations

import importlib

import pytest

from core.trainers import (CHECKPOINTS_ENV, DATA_ENV, PROFILES_ENV, PROGRESS_ENV, TRAINERS,
                           own_container_row)
from manifests.run import build_runs
from stack.own_container import RunAs
from stack.run_data import DATA_KEYS
from stack.runs import RunConfig, run_problems
from stack.secrets import runs_needing_hf_token
from tests.support import examples

CONTRACTS = examples.CONTRACTS
DIGEST = "us-docker.pkg.dev/p/team/train@sha256:" + "a" * 64
CHAT = RunConfig(name="chat", trainer="gemma-jax", pool="v6e-1x1", data="tickets.jsonl", format="conversational")
OWN = RunConfig(name="own", pool="v6e-2x4", image=DIGEST, command=("python", "train.py"), args=("--steps", "9"))


def problems(*runs: RunConfig) -> list[str]:
    return [str(p) for p in run_problems(runs, CONTRACTS)]


def pod(run: RunConfig) -> dict:
    manifest = build_runs([run], CONTRACTS, examples.FACTS)[run.name]
    return manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


# --- data settings ------------------------------------------------------------------------------

@pytest.mark.parametrize("update, expected", [
    ({"format": "chat"}, "runs[0].format: 'chat' on run 'chat' is not a data format; "
                         "allowed: text | conversational | sharegpt | prompt-completion"),
    ({"columns": {"prompt": "question"}}, "runs[0].columns: 'prompt=question' on run 'chat' maps 'prompt', which is "
                                          "not a column of format conversational; allowed: messages, tools"),
    ({"prompt_template": "{question}"}, "runs[0].promptTemplate: '{question}' on run 'chat' builds a prompt, and "
                                        "format conversational has none"),
    ({"format": "prompt-completion", "prompt_template": "{}"}, "runs[0].promptTemplate: '{}' on run 'chat' has a "
                                                               "positional field"),
    ({"format": "prompt-completion", "prompt_template": "Q: {q:{w}}"},
     "runs[0].promptTemplate: 'Q: {q:{w}}' on run 'chat' field {q:{w}} has a field inside it; write {q}; allowed: "
     "{column} fields, each naming a column of the record (e.g. {question}), and text ({{ and }} for a brace); no "
     "format spec ({x:>9}), conversion ({x!r}), index or attribute ({x[0]}, {x.y}) and no field inside a field"),
    ({"format": "prompt-completion", "prompt_template": "{q!s}"}, "runs[0].promptTemplate: '{q!s}' on run 'chat' "
                                                                  "field {q!s} has a conversion (!s); write {q}"),
    ({"format": "text", "system_prompt": "Be brief."}, "runs[0].systemPrompt: 'Be brief.' on run 'chat' adds a turn"),
    ({"loss": "answers"}, "runs[0].loss: 'answers' on run 'chat' is not a loss setting; allowed: completion | all"),
    ({"format": ""}, "runs[0].format: '' on run 'chat' is not a data format"),  # not the default: a flag of ''
    ({"loss": ""}, "runs[0].loss: '' on run 'chat' is not a loss setting"),
    ({"args": ("--data_format", "text")}, "runs[0].args: '--data_format' on run 'chat': flag --data_format is set "
                                          "from the run's `format`; allowed: `format` instead"),
])  # fmt: skip
def test_bad_data_settings_name_the_key_the_value_and_what_is_allowed(update, expected):
    [message] = problems(CHAT.model_copy(update=update))
    assert message.startswith(expected), message


def test_data_settings_become_the_trainers_flags_after_the_platform_s():
    run = CHAT.model_copy(update={"format": "prompt-completion", "columns": {"completion": "sql"},
                                  "prompt_template": "{schema}\n{q}", "system_prompt": "SQL.", "loss": "all"})
    assert problems(run) == []
    args = pod(run)["containers"][0]["args"]
    at = args.index("--data_format")
    assert args[at:] == ["--data_format", "prompt-completion", "--columns", "completion=sql", "--prompt_template",
                         "{schema}\n{q}", "--system_prompt", "SQL.", "--loss_on", "all"]
    assert args[:at][-2:] == ["--peak_flops_per_device", "9.18e+14"]  # after the platform's own flags


@pytest.mark.parametrize("trainer", sorted(TRAINERS))
def test_every_trainer_declares_the_data_flags(trainer):
    """The flags the stack passes are the ones each trainer's flags module declares, with its choices."""
    check = importlib.import_module(TRAINERS[trainer].flags_module).argument_problems
    good = ["--data_format", "conversational", "--columns", "messages=turns", "--prompt_template", "{q}",
            "--system_prompt", "Hi.", "--loss_on", "all"]
    assert check(good) == []
    assert [flag for _, _, flag in DATA_KEYS] == good[::2]
    [bad] = check(["--data_format", "chat"])
    assert bad.startswith("--data_format:") and "chat" in bad


# --- one's own container ------------------------------------------------------------------------

@pytest.mark.parametrize("update, expected", [
    ({"command": ()}, "runs[0].trainer: not set, on run 'own': a run needs a trainer, or an image and a command; "
                      "allowed: trainer: one of the trainer table's, or image (by digest) and command"),
    ({"image": None}, "runs[0].image: not set, on run 'own': a run of your own container needs its image"),
    ({"image": "us-docker.pkg.dev/p/team/train:latest"}, "runs[0].image: 'us-docker.pkg.dev/p/team/train:latest' on "
                                                         "run 'own' must be pinned by digest"),
    ({"trainer": "gemma-jax", "data": "x"}, "runs[0].command: ['python', 'train.py'] on run 'own': trainer gemma-jax "
                                            "is started by its image's own command"),
    ({"format": "text"}, "runs[0].format: 'text' on run 'own': a data setting of the trainers"),
    ({"profile": True}, "runs[0].profile: true on run 'own': the platform has no profiler flag"),
    ({"pool": "v5e"}, "runs[0].pool: 'v5e' does not exist on run 'own'"),
    ({"env": {DATA_ENV: "/x"}}, f"runs[0].env.{DATA_ENV}: '/x' on run 'own': env {DATA_ENV} is set by the platform"),
])  # fmt: skip
def test_bad_own_container_runs_name_the_key_the_value_and_what_is_allowed(update, expected):
    [message] = problems(OWN.model_copy(update=update))
    assert message.startswith(expected), message


def test_only_a_run_of_ones_own_container_asks_for_the_token_or_a_user():
    [token, user] = problems(CHAT.model_copy(update={"hf_token": True, "run_as": RunAs(user=1, group=1)}))
    assert token.startswith("runs[0].hfToken: true on run 'chat': trainer gemma-jax is started by its image's")
    assert user.startswith("runs[0].runAs:")
    raw = [{"name": "own", "pool": "a4", "image": DIGEST, "command": ["x"], "hfToken": True}]
    assert runs_needing_hf_token(raw) == [(0, "own", "container")]
    assert runs_needing_hf_token([{**raw[0], "hfToken": False}]) == []


def test_any_pool_takes_ones_own_container():
    for pool in CONTRACTS:
        assert problems(OWN.model_copy(update={"pool": pool})) == [], pool


def test_ones_own_container_gets_what_a_trainer_run_gets_on_a_multi_host_slice():
    trainer = pod(RunConfig(name="own", trainer="gemma-jax", pool="v6e-2x4", data="tickets"))
    own = pod(OWN.model_copy(update={"data": "tickets"}))
    container, reference = own["containers"][0], trainer["containers"][0]
    assert container["image"] == DIGEST and container["command"] == ["python", "train.py"]
    assert container["args"] == ["--steps", "9"] and "workingDir" not in container
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {"PYTHONUNBUFFERED": "1", "GKE_FINETUNE_RUN": "own", DATA_ENV: "/data/tickets",
                   CHECKPOINTS_ENV: "/checkpoints", PROFILES_ENV: "/profiles", PROGRESS_ENV: "/checkpoints/progress.json"}
    # The same pod otherwise: service account, mounts, selector, tolerations, requests, TPU port.
    for key in ("serviceAccountName", "nodeSelector", "tolerations", "volumes", "securityContext",
                "terminationGracePeriodSeconds", "automountServiceAccountToken"):
        assert own[key] == trainer[key], key
    for key in ("resources", "volumeMounts", "ports", "securityContext", "imagePullPolicy"):
        assert container[key] == reference[key], key


def test_ones_own_container_on_gpu_with_the_token_and_a_user():
    own = OWN.model_copy(update={"pool": "a4", "hf_token": True, "run_as": RunAs(user=1000, group=1000)})
    spec = pod(own)
    container = spec["containers"][0]
    row = own_container_row(CONTRACTS["a4"].family, True, 1000, 1000)
    assert spec["securityContext"]["runAsUser"] == 1000 and spec["securityContext"]["fsGroup"] == 1000
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert {"name": "HF_TOKEN_PATH", "value": "/var/run/secrets/huggingface/token"} in container["env"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["dshm"]["emptyDir"]["sizeLimit"] == row.shm_size and "hf-token" in volumes
    # The FUSE mounts belong to the container's user, or it could not write its checkpoints.
    assert "uid=1000,gid=1000" in volumes["checkpoints"]["csi"]["volumeAttributes"]["mountOptions"]
    assert container["resources"]["limits"] == container["resources"]["requests"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"


# --- the model, by name ---------------------------------------------------------------------------

GPU = RunConfig(name="gpu", trainer="trl-gpu", pool="a4")


@pytest.mark.parametrize("run, expected", [
    (CHAT.model_copy(update={"model": "gemma5"}), "runs[0].model: 'gemma5' on run 'chat' is not a model the "
                                                  "trainers know; allowed: gemma3-270m, gemma3-1b"),
    (CHAT.model_copy(update={"model": "gemma3-1b", "revision": "abc"}), "runs[0].revision: 'abc' on run 'chat': "
                                                                       "trainer gemma-jax reads gemma's own checkpoint"),
    (GPU.model_copy(update={"revision": "abc"}), "runs[0].model: not set, on run 'gpu': `revision` and `weights` are"),
    (GPU.model_copy(update={"model": "gemma3-1b", "weights": "/models/x"}), "runs[0].weights: '/models/x' on run "
                                                                            "'gpu' is not a path below the bucket's"),
    (GPU.model_copy(update={"model": "gemma3-1b", "args": ("--model_id", "x")}), "runs[0].args: '--model_id' on run "
                                                                                "'gpu': flag --model_id is set from "
                                                                                "the run's `model`"),
    (OWN.model_copy(update={"model": "gemma3-1b"}), "runs[0].model: 'gemma3-1b' on run 'own': a setting of the "
                                                    "trainers"),
])  # fmt: skip
def test_bad_model_settings_name_the_key_the_value_and_what_is_allowed(run, expected):
    assert any(m.startswith(expected) for m in problems(run)), problems(run)


def test_a_model_by_name_reaches_each_trainer_in_its_own_terms():
    gpu = pod(GPU.model_copy(update={"model": "gemma3-4b", "revision": "0123abc"}))["containers"][0]
    assert gpu["args"][-4:] == ["--model_id", "google/gemma-3-4b-it", "--model_revision", "0123abc"]
    launcher = gpu["command"]
    assert launcher[launcher.index("--fsdp_transformer_layer_cls_to_wrap") + 1] == "Gemma3DecoderLayer"
    assert launcher[-2:] == ["-m", "trainers.trl_gpu.sft"]
    tuned = pod(GPU.model_copy(update={"model": "gemma4-31b", "weights": "tuned/gemma4"}))["containers"][0]
    assert tuned["args"][-2:] == ["--model_id", "/data/tuned/gemma4"]
    assert "Gemma4TextDecoderLayer" in tuned["command"]
    jax = pod(CHAT.model_copy(update={"model": "gemma3-1b", "weights": "tuned/g3"}))["containers"][0]["args"]
    assert jax[jax.index("--model"):jax.index("--model") + 4] == ["--model", "gemma3-1b", "--init_from_hf",
                                                                  "/data/tuned/g3"]
