"""A run's `mix`: several datasets mixed by weight, each with its own format and columns. Each bad input is
refused before anything is declared, naming the key, the value and what is allowed; a good mix becomes the
trainers' `--data_mix` flag, read where the pod mounts datasets/<stack>/, and the trainers' own parser
takes it."""

from __future__ import annotations

import importlib
import json

import pytest

from core.trainers import TRAINERS
from manifests.run import build_runs, platform_facts
from stack.config import StackConfig
from stack.problems import ConfigError
from tests.support import examples
from trainers.sft_data import mixture

POOLS = [{"name": "p", "accelerator": "tpu-v6e", "topology": "1x1"}]
BASE = {"project": "my-project-id", "region": "us-east5", "zones": ["us-east5-b"], "pools": POOLS}
DATASETS = [{"name": "tickets", "url": "https://example.com/tickets.jsonl"},
            {"name": "chats", "gcs": "gs://team-data/chats/"},
            {"name": "stories", "url": "https://example.com/data/TinyStories-train.txt", "tokenize": "gemma3-270m"}]
MIX = [{"data": "tickets", "weight": 3, "format": "conversational"},
       {"data": "chats/sharegpt.jsonl", "weight": 1.5, "format": "sharegpt", "columns": {"conversations": "turns"}},
       {"data": "stories", "weight": 1}]


def _run(**kw):
    return {"name": "mixed", "trainer": "gemma-jax", "pool": "p", "mix": MIX, "loss": "all", **kw}


def config(**kw) -> StackConfig:
    return StackConfig.from_mapping({**BASE, "datasets": DATASETS, "runs": [_run(**kw)]})


def problems(**kw) -> list[str]:
    with pytest.raises(ConfigError) as err:
        config(**kw)
    return err.value.problems


def _args(cfg: StackConfig) -> list[str]:
    manifest = build_runs(cfg.runs, cfg.contracts(), platform_facts(cfg, examples.FACTS.images))["mixed"]
    return manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["args"]


def test_a_mix_becomes_the_trainers_data_mix_flag_with_the_pod_s_paths():
    cfg = config()
    assert cfg.mix_paths() == {"mixed": ("tickets/tickets.jsonl", "chats/sharegpt.jsonl",
                                         "stories/TinyStories-train.txt")}  # records: a mix never reads token shards
    args = _args(cfg)
    assert "--data_path" not in args and args[args.index("--loss_on") + 1] == "all"
    sources = mixture.parse(args[args.index("--data_mix") + 1], "all")
    assert [(s.path, s.weight, s.spec.format, s.spec.columns) for s in sources] == [
        ("/data/tickets/tickets.jsonl", 3.0, "conversational", ()),
        ("/data/chats/sharegpt.jsonl", 1.5, "sharegpt", (("conversations", "turns"),)),
        ("/data/stories/TinyStories-train.txt", 1.0, "text", ())]
    assert cfg.staging_trainer(cfg.dataset("chats")) == "gemma-jax"  # a mix reads each of its datasets


@pytest.mark.parametrize("trainer", sorted(TRAINERS))
def test_every_trainer_takes_the_flag(trainer):
    check = importlib.import_module(TRAINERS[trainer].flags_module).argument_problems
    assert check(["--data_mix", json.dumps([{"path": "/data/a", "weight": 1}] * 2)]) == []


@pytest.mark.parametrize("update, expected", [
    ({"mix": [MIX[0]]}, "runs[0].mix: '1 source' on run 'mixed' mixes nothing; allowed: two or more sources"),
    ({"mix": [{**MIX[0], "weight": 0}, MIX[1]]},
     "runs[0].mix[0].weight: 0.0 on run 'mixed' is not a positive number; allowed: a number above 0"),
    ({"mix": [{**MIX[0], "weight": True}, MIX[1]]}, "runs[0].mix[0].weight: true is a boolean; allowed: a number"),
    ({"mix": [MIX[0], {**MIX[1], "format": "chat"}]},
     "runs[0].mix[1].format: 'chat' on run 'mixed' is not a data format; allowed: text | conversational | sharegpt | "
     "prompt-completion"),
    ({"mix": [MIX[0], {**MIX[1], "columns": {"messages": "turns"}}]},
     "runs[0].mix[1].columns: 'messages=turns' on run 'mixed' maps 'messages', which is not a column of format "
     "sharegpt; allowed: conversations, tools"),
    ({"mix": [MIX[0], {**MIX[1], "systemPrompt": "Hi", "format": "text"}]}, "runs[0].mix[1].systemPrompt: 'Hi'"),
    ({"mix": [MIX[0], {**MIX[1], "data": "../secrets"}]},
     "runs[0].mix[1].data: '../secrets' on run 'mixed' climbs out of datasets/<stack>/"),
    ({"mix": [MIX[0], {**MIX[1], "data": "other/x.jsonl"}]},
     "runs[0].mix[1].data: 'other/x.jsonl' on run 'mixed' names no dataset of the stack; allowed: a dataset of "
     "`datasets:` (tickets, chats, stories)"),
    ({"mix": [MIX[0], {**MIX[1], "shuffle": True}]}, "runs[0].mix[1].shuffle"),
    ({"data": "tickets"}, "runs[0].data: 'tickets' on run 'mixed' is set beside `mix`, whose sources each carry "
                          "their own; allowed: `data` on each source of `mix`"),
    ({"format": "conversational"}, "runs[0].format: 'conversational' on run 'mixed' is set beside `mix`"),
    ({"args": ["--data_mix", "[]"]}, "runs[0].args: '--data_mix' on run 'mixed': flag --data_mix is set from the "
                                     "run's `mix`"),
    ({"trainer": None, "image": "us-docker.pkg.dev/p/r/i@sha256:" + "a" * 64, "command": ["x"], "loss": None},
     "runs[0].mix: '3 sources' on run 'mixed': a mix is read by the trainers"),
])  # fmt: skip
def test_a_bad_mix_names_the_key_the_value_and_what_is_allowed(update, expected):
    found = problems(**update)
    assert any(p.startswith(expected) for p in found), found


def test_a_run_needs_data_or_a_mix():
    found = problems(mix=[])
    assert "runs[0].data: not set, on run 'mixed': trainer gemma-jax needs `data`; allowed: a file below the " \
           "bucket's datasets/<stack>/, or a `mix` of datasets" in found, found


def test_a_mix_longer_than_one_argument_is_refused():
    long = [{**MIX[0], "promptTemplate": None, "systemPrompt": "x" * 140_000}, MIX[1]]
    found = problems(mix=long)
    assert any(p.startswith("runs[0].mix: '[") and "longer than one argument" in p for p in found), found
