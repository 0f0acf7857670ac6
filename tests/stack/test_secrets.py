"""The Hugging Face token: mounted from Secret Manager by the pods that read the Hub, never a Pulumi value."""

import pytest

from core.trainers import TRAINERS
from stack.problems import ConfigError
from stack.reader import load_files
from stack.secrets import (file_token_state, hf_token_problems, needs_hf_token, runs_needing_hf_token,
                           secret_name, secret_problems, secret_version)
from tests.support.checkout import ROOT

HUB = next(name for name, row in TRAINERS.items() if row.hf_token)
NO_HUB = next(name for name, row in TRAINERS.items() if not row.hf_token)


def run(name, trainer):
    return {"name": name, "trainer": trainer, "pool": "p"}


def test_only_runs_of_a_hub_trainer_need_the_token():
    runs = [run("tpu", NO_HUB), run("gpu", HUB), run("bad", "no-such-trainer"), "not a run"]
    assert runs_needing_hf_token(runs) == [(1, "gpu", HUB)]
    assert not needs_hf_token([run("tpu", NO_HUB)])
    assert not needs_hf_token("not a list")


def test_nothing_is_asked_of_a_stack_that_holds_no_token():
    assert hf_token_problems("unset") == []


@pytest.mark.parametrize("state, words", [
    ("plain", "hfToken: '[plain text]' is stored in plain text in the stack file"),
    ("secret", "hfToken: '[secret]' is a Pulumi secret: the stack file holds its ciphertext and the passphrase's salt"),
])  # fmt: skip
def test_the_retired_key_is_refused_in_any_form_with_the_way_to_move_it(state, words):
    (problem,) = hf_token_problems(state)
    assert str(problem).startswith(words), str(problem)
    assert "gcloud secrets create hf-token --data-file=-" in str(problem) and "pulumi config rm hfToken" in str(problem)


@pytest.mark.parametrize("raw, state", [(None, "unset"), ("", "unset"), ("hf_x", "plain"),
                                        ({"secure": "AAABA"}, "secret")])
def test_how_a_stack_file_holds_the_key(raw, state):
    assert file_token_state(raw) == state


@pytest.mark.parametrize("stack", ["dev", "a4"])  # a stack that reads no Hub, and one that does
def test_the_offline_reader_refuses_a_plain_text_token_whether_or_not_a_run_needs_it(stack, tmp_path):
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / f"Pulumi.{stack}.yaml").write_text((ROOT / f"Pulumi.{stack}.yaml").read_text()
                                                   + "  gke-finetune:hfToken: hf_plainvalue\n")
    with pytest.raises(ConfigError) as err:
        load_files(stack, tmp_path)
    assert [p for p in err.value.problems if p.startswith("hfToken: '[plain text]'")], err.value.problems
    assert "hf_plainvalue" not in str(err.value.problems)


@pytest.mark.parametrize("value, version", [
    ("hf-token", "projects/p-123456/secrets/hf-token/versions/latest"),
    ("hf_token/versions/3", "projects/p-123456/secrets/hf_token/versions/3"),
    ("projects/shared-secrets/secrets/team-hf", "projects/shared-secrets/secrets/team-hf/versions/latest"),
])  # fmt: skip
def test_the_secret_the_pods_mount(value, version):
    assert secret_problems(value) == [] and secret_version(value, "p-123456") == version
    assert secret_name(value, "p-123456") == version.rsplit("/versions/", 1)[0]


@pytest.mark.parametrize("value", ["", "hf token", "projects/P/secrets/x", "x/versions/0", "x/versions/v1",
                                   "projects/p-123456/secrets/"])
def test_a_secret_that_is_none_is_refused_with_the_forms_allowed(value):
    (problem,) = secret_problems(value)
    assert "projects/<project>/secrets/<secret>" in str(problem)
