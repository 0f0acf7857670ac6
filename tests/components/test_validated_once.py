"""A stack's runs are checked once, by the stack's reader: the program's components and manifest builders
take the validated config and check only what they alone know (the images)."""

from __future__ import annotations

from collections import Counter

import pytest

import stack.runs
from stack.config import ConfigError
from tests.support.pulumi_harness import SHIPPED_STACKS, declared_before_error, run_stack


@pytest.fixture
def checked(monkeypatch) -> Counter:
    """How often each run's own rules run (stack/runs.py `_one_run_problems`), by run name."""
    counts: Counter = Counter()
    rules = stack.runs._one_run_problems

    def counting(run, contracts):
        counts[run.name] += 1
        return rules(run, contracts)

    monkeypatch.setattr(stack.runs, "_one_run_problems", counting)
    return counts


@pytest.mark.parametrize("name", SHIPPED_STACKS)
def test_the_program_checks_each_run_once(name, checked):
    deployment = run_stack(name)
    runs = {r.inputs["metadata"]["name"] for r in deployment.resources if r.type.endswith(":JobSet")}
    assert runs and set(checked) >= runs
    assert set(checked.values()) == {1}, checked


def test_a_bad_run_is_refused_once_by_the_reader_before_anything_is_declared(checked):
    bad = {"name": "r", "trainer": "trl-gpu", "pool": "v6e-1x1"}  # a GPU trainer on a TPU pool
    declared, err = declared_before_error("dev", overrides={"gke-finetune:runs": [bad]})
    assert isinstance(err, ConfigError) and "needs a GPU pool" in str(err)
    assert str(err).count("needs a GPU pool") == 1
    assert checked == Counter({"r": 1}) and declared.resources == []
