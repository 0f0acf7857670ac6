"""The Hugging Face token: required only by runs whose trainer reads the Hub, never in plain text."""

import pytest

from core.trainers import TRAINERS
from stack.problems import MISSING
from stack.secrets import hf_token_problems, needs_hf_token, runs_needing_hf_token

HUB = next(name for name, row in TRAINERS.items() if row.hf_token)
NO_HUB = next(name for name, row in TRAINERS.items() if not row.hf_token)


def run(name, trainer):
    return {"name": name, "trainer": trainer, "pool": "p"}


def test_only_runs_of_a_hub_trainer_need_the_token():
    runs = [run("tpu", NO_HUB), run("gpu", HUB), run("bad", "no-such-trainer"), "not a run"]
    assert runs_needing_hf_token(runs) == [(1, "gpu", HUB)]
    assert not needs_hf_token([run("tpu", NO_HUB)])
    assert not needs_hf_token("not a list")


def test_an_unset_token_names_every_run_that_needs_it():
    (first, second) = hf_token_problems([run("a", HUB), run("t", NO_HUB), run("b", HUB)], "unset")
    assert first.key == "hfToken" and first.value is MISSING
    assert str(first).startswith(f"hfToken: not set, and run 'a' (runs[0], trainer {HUB}) reads the Hugging Face Hub")
    assert "runs[2]" in str(second) and "'b'" in str(second)
    assert "pulumi config set --secret hfToken" in str(first)


@pytest.mark.parametrize("runs", [[], [run("t", NO_HUB)]])
def test_no_token_needed_without_a_hub_run(runs):
    assert hf_token_problems(runs, "unset") == []


def test_a_secret_token_passes_and_a_plain_one_never_does():
    assert hf_token_problems([run("a", HUB)], "secret") == []
    for runs in ([], [run("a", HUB)]):
        (problem,) = hf_token_problems(runs, "plain")
        assert str(problem).startswith("hfToken: '[plain text]' is stored in plain text")
