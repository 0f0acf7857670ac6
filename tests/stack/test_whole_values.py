"""Whole-value checks: every pattern check matches the whole value (`fullmatch`; Python's `$` also matches
before a trailing newline), and a number, a null or a list where text belongs is a message naming the key,
not a traceback."""

from __future__ import annotations

import copy

import pytest

from core import syntax
from core.images import image_problem
from stack import reader
from stack.problems import ConfigError
from tests.support.pulumi_harness import ROOT

DIGEST = "us-docker.pkg.dev/p/r/gemma-jax@sha256:" + "a" * 64


def _dev() -> dict:
    return copy.deepcopy(reader.model_values(reader.file_values("dev", ROOT), "dev"))


@pytest.mark.parametrize("check, good", [
    (syntax.is_dns_label, "gemma3-run"),
    (lambda v: syntax.dns_1123_label_problem(v) is None, "ns"),
    (lambda v: syntax.dns_1123_subdomain_problem(v) is None, "a.b"),
    (lambda v: syntax.label_value_problem(v) is None, "v1"),
    (lambda v: syntax.qualified_name_problem(v) is None, "example.com/key"),
    (lambda v: syntax.port_name_problem(v) is None, "http"),
    (lambda v: syntax.env_name_problem(v) is None, "MY_VAR"),
    (lambda v: syntax.PROJECT_ID.fullmatch(v) is not None, "my-project-id"),
    (lambda v: syntax.ZONE.fullmatch(v) is not None, "us-east5-b"),
    (lambda v: image_problem(v) is None, DIGEST),
])  # fmt: skip
def test_a_trailing_newline_is_refused_by_every_pattern(check, good):
    assert check(good)
    assert not check(good + "\n") and not check(good + "\n\n") and not check(" " + good)


@pytest.mark.parametrize("key, value, expected", [
    ("namespace", "finetune\n", "namespace: 'finetune\\n' "),
    ("project", "my-project-id\n", "gcp:project: 'my-project-id\\n' is not a project id"),
    ("region", "us-east5\n", "gcp:region: 'us-east5\\n' is not a region"),
    ("zones", ["us-east5-b\n"], "zones"),
])  # fmt: skip
def test_top_level_values_with_a_trailing_newline_are_refused(key, value, expected):
    mapping = _dev()
    mapping[key] = value
    with pytest.raises(ConfigError) as err:
        reader.validate(mapping)
    assert any(p.startswith(expected) for p in err.value.problems), err.value.problems


@pytest.mark.parametrize("change, expected", [
    ({"name": "gemma3-single-host\n"}, "runs[0].name: 'gemma3-single-host\\n' is not a DNS-1035 label"),
    ({"image": DIGEST + "\n"}, "runs[0].image: '" + DIGEST + "\\n' on run 'gemma3-single-host' must be pinned"),
    ({"env": {"A\n": "x"}}, "runs[0].env.A\n: 'x' on run 'gemma3-single-host': env name 'A\\n' is not a valid"),
    ({"name": 12345}, "runs[0].name: 12345 is a number; allowed: text"),
    ({"name": None}, "runs[0].name: null is no value; allowed: text"),
    ({"name": ["a"]}, "runs[0].name: ['a'] is a list; allowed: text"),
    ({"args": ["--maxlen", 256]}, "runs[0].args[1]: 256 is a number; allowed: text"),
    ({"profile": "yes"}, "runs[0].profile: 'yes' is text; allowed: true or false"),
    ({"env": {"A": 1}}, "runs[0].env.A: 1 is a number; allowed: text"),
    ({"columns": ["prompt"]}, "runs[0].columns: ['prompt'] is a list; allowed: a mapping"),
])  # fmt: skip
def test_a_run_value_of_the_wrong_kind_is_a_message_naming_its_key(change, expected):
    mapping = _dev()
    mapping["runs"][0].update(change)
    with pytest.raises(ConfigError) as err:
        reader.validate(mapping)
    assert any(p.startswith(expected) for p in err.value.problems), err.value.problems


@pytest.mark.parametrize("value", [12345, None, ["a"], {"a": 1}, True])
def test_a_namespace_of_another_kind_is_a_message(value):
    mapping = _dev()
    mapping["namespace"] = value
    with pytest.raises(ConfigError) as err:
        reader.validate(mapping)
    assert [p for p in err.value.problems if p.startswith("namespace: ")], err.value.problems
