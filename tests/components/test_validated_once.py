"""A stack is checked once, by the stack's reader: the program's components, the manifest builders and the
tools take the validated config (StackConfig and the types in it) and don't run its rules again.

Every rule of the stack layer (each `*_problems` function of stack/, and core/images.py `image_problem`,
which the rules use) is counted, by the subject it is given, wherever the program calls it: patched on
every module that holds it, so that a later layer calling it again is counted too.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import types
from collections import Counter

import pytest

import core.images
import stack
from stack.config import ConfigError
from stack.images import offline_images
from stack.reader import load_files
from tests.support.pulumi_harness import (EXISTING_CLUSTER_STACKS, ROOT, SHIPPED_STACKS, declared_before_error,
                                          run_stack)

LAYERS = ("core", "stack", "manifests", "admission", "components", "tools")
# Rules the program never runs over a shipped stack, and why.
NOT_IN_THE_PROGRAM = {
    "stack.global_names.collision_problems": "make plan's, across the checkout's stack files (tools/plan/collect.py)",
    "stack.rules.placeholder_problems": "only when `pulumi up` applies (stack/reader.py `applying`)",
    "stack.serving.placeholder_problems": "only when `pulumi up` applies (stack/reader.py `applying`)",
    "stack.sharing._quota_problems": "only for a pool's `quota:` share, which no shipped stack sets",
    "stack.sharing._limit_problems": "only for a pool's `quota:` share, which no shipped stack sets",
    "stack.run_env._ref_problems": "only for an `env:` value from a Secret, which no shipped stack has",
}


def rules() -> dict[str, types.FunctionType]:
    found = {"core.images.image_problem": core.images.image_problem}
    for info in pkgutil.walk_packages(stack.__path__, "stack."):
        module = importlib.import_module(info.name)
        if info.name == "stack.problems":  # rendering and raising, no rule
            continue
        found.update({f"{info.name}.{name}": value for name, value in vars(module).items()
                      if isinstance(value, types.FunctionType) and name.endswith("_problems")
                      and value.__module__ == info.name})
    return found


RULES = rules()  # the functions themselves, before any test wraps them


@pytest.fixture
def checked(monkeypatch) -> Counter:
    """How often each rule ran, by (rule, subject): the arguments it was given, as their repr."""
    counts: Counter = Counter()
    originals = {id(f): (name, f) for name, f in RULES.items()}

    def counting(name, rule):
        def count(*args, **kwargs):
            counts[(name, repr(args) + repr(kwargs))] += 1
            return rule(*args, **kwargs)
        return count

    wrappers = {key: counting(name, rule) for key, (name, rule) in originals.items()}
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").partition(".")[0] in LAYERS:
            for attr, value in list(vars(module).items()):
                if id(value) in wrappers and value is originals[id(value)][1]:
                    monkeypatch.setattr(module, attr, wrappers[id(value)])
    return counts


def twice(counts: Counter) -> dict:
    return {(rule, subject[:200]): n for (rule, subject), n in counts.items() if n > 1}


@pytest.mark.parametrize("name", SHIPPED_STACKS + EXISTING_CLUSTER_STACKS)
def test_the_program_runs_each_rule_once_on_each_subject(name, checked):
    deployment = run_stack(name)
    assert deployment.resources and checked
    assert twice(checked) == {}


def test_every_rule_of_the_stack_layer_runs_in_the_program(checked):
    for name in SHIPPED_STACKS + EXISTING_CLUSTER_STACKS:
        run_stack(name)
    ran = {rule for rule, _ in checked}
    assert set(RULES) - ran == set(NOT_IN_THE_PROGRAM)


def test_make_plan_validates_the_stack_once(monkeypatch):
    """`make plan` runs the program (which reads the stack) and reports on what that read gave; only the
    checkout's other stack files are read besides, each once, for the names they claim."""
    from stack import reader
    from tools.plan.collect import collect

    validated: Counter = Counter()
    validate = reader.validate

    def counting(values, *args, **kwargs):
        validated[values.get("stack")] += 1
        return validate(values, *args, **kwargs)

    monkeypatch.setattr(reader, "validate", counting)
    collect("tpu-queued")
    assert validated["tpu-queued"] == 1
    assert set(validated.values()) == {1} and len(validated) > 1, validated


@pytest.mark.parametrize("name", SHIPPED_STACKS + EXISTING_CLUSTER_STACKS + ("tpu-queued-own",))
def test_every_trainer_run_has_an_image_by_digest_by_construction(name):
    """Why the manifest builders check no image: the one build-or-pin decision (stack/images.py) gives
    every trainer a run or staging Job uses an image, pinned (its digest checked by the reader) or built."""
    config = _config(name)
    images = offline_images(config)
    assert set(images) == set(config.needed_trainers()) | set(config.images.by_trainer())
    for run in config.runs:
        assert core.images.image_problem(run.image or images[run.trainer]) is None


def _config(name: str):
    if name != "tpu-queued-own":
        return load_files(name, ROOT)
    # every run of a trainer names its own image, and no stack image is pinned: nothing is built for them
    config = load_files("tpu-queued", ROOT)
    own = [r.model_copy(update={"image": f"r.example/own@sha256:{'1' * 64}"}) if r.trainer else r
           for r in config.runs]
    return config.model_copy(update={"runs": tuple(own)})


_TAG = "us-docker.pkg.dev/p/r/trainer:latest"
# (stack, overrides, what the one error says): one bad value for a rule of each kind, each of which must be
# reported exactly once, by the reader, before anything is declared.
BAD = [
    ("dev", {"gke-finetune:runs": [{"name": "r", "trainer": "trl-gpu", "pool": "v6e-1x1"}]}, "needs a GPU pool"),
    ("dev", {"gke-finetune:runs": [{"name": "r", "trainer": "gemma-jax", "pool": "v6e-1x1", "data": "tinystories",
                                    "image": _TAG}]}, "must be pinned by digest"),
    ("dev", {"gke-finetune:images": {"gemma-jax": _TAG}}, "is not a digest reference"),
    ("dev", {"gke-finetune:bucketName": "Not_A_Bucket"}, "Not_A_Bucket"),
    ("dev", {"gke-finetune:namespace": "Bad_Namespace"}, "Bad_Namespace"),
    ("dev", {"gke-finetune:datasets": [{"name": "mine", "path": "../outside.jsonl"}]}, "../outside.jsonl"),
    ("tpu-queued", {"gke-finetune:runs": [{"name": "r", "trainer": "gemma-jax", "pool": "v6e-2x4",
                                           "data": "tinystories", "ladder": ["nope"]}]}, "nope"),
]


@pytest.mark.parametrize("name,overrides,said", BAD, ids=[said for *_, said in BAD])
def test_each_bad_value_is_refused_once_by_the_reader_before_anything_is_declared(name, overrides, said, checked):
    declared, err = declared_before_error(name, overrides=overrides)
    assert isinstance(err, ConfigError), err
    assert str(err).count(said) == 1, str(err)
    assert declared.resources == []
    assert twice(checked) == {}
