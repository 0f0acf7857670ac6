"""What a run's process gets besides its trainer's flags: its `env:`, and the sizes Linux and Kubernetes bound.

An `env:` value is text, or a reference to a key of a Kubernetes Secret in the runs' namespace:

    env:
      WANDB_PROJECT: sql-tuning
      WANDB_API_KEY: {secret: wandb, key: api-key}     # kubectl -n <namespace> create secret generic wandb ...

which the pod reads as `valueFrom.secretKeyRef` (https://kubernetes.io/docs/concepts/configuration/secret/
#using-secrets-as-environment-variables): the value is in neither the stack file, nor Pulumi's state, nor the
JobSet. A variable whose name says it holds a credential (core/syntax.py `looks_like_credential`) must be one.

Each argument and each `NAME=value` of the process is at most core/syntax.py ARG_STRING_MAX_BYTES, all of
them together at most ARG_TOTAL_MAX_BYTES; past those the container never starts (execve's E2BIG), so they
are refused here, naming the key.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated, Any

from pydantic import Discriminator, Field, Tag, model_validator

from core.syntax import (ARG_STRING_MAX_BYTES, ARG_TOTAL_MAX_BYTES, ENV_NAME, dns_1123_subdomain_problem,
                         looks_like_credential, utf8_size)
from core.trainers import RESERVED_ENV
from stack.models import StackModel
from stack.problems import Problem, raise_problems
from trainers.sft_data import mixture

_SECRET_KEY_MAX = 253  # a Secret's data key: IsConfigMapKey, k8s.io/apimachinery pkg/util/validation
_SECRET_KEY = "letters, digits, '-', '_' and '.', at most 253"
SECRET_FORM = "{secret: <a Secret in the runs' namespace>, key: <its key>}"


class SecretRef(StackModel):
    """An environment value from a key of a Kubernetes Secret in the runs' namespace."""

    secret: str = Field(description="the Secret's name")
    key: str = Field(description="the key of its data")

    @model_validator(mode="before")
    @classmethod
    def _only_its_keys(cls, value: Any) -> Any:
        if isinstance(value, dict):
            raise_problems(Problem(str(k), v, "is an unknown key", "secret, key") for k, v in value.items()
                           if k not in ("secret", "key"))
        return value

    def env(self, name: str) -> dict:
        return {"name": name, "valueFrom": {"secretKeyRef": {"name": self.secret, "key": self.key}}}


def _env_kind(value: Any) -> str:
    return "value:secret" if isinstance(value, (dict, SecretRef)) else "value:text"


# An `env:` value: text, or (a mapping) a Secret reference; the tags name the kind for pydantic, and the key
# paths of problems leave them out (stack/problems.py `key_path`).
EnvValue = Annotated[Annotated[str, Tag("value:text")] | Annotated[SecretRef, Tag("value:secret")],
                     Discriminator(_env_kind)]


def env_entry(name: str, value: str | SecretRef) -> dict:
    """A container's env entry for one `env:` item."""
    return value.env(name) if isinstance(value, SecretRef) else {"name": name, "value": value}


def env_problems(env: dict[str, Any], where: str) -> list[Problem]:
    problems = []
    for name in sorted(env):
        value = env[name]
        shown = value if isinstance(value, SecretRef) else "[plain text]" if looks_like_credential(name) else value
        if not ENV_NAME.fullmatch(name):
            problems.append(Problem(f"env.{name}", shown, f"{where}: env name {name!r} is not a valid variable name",
                                    "letters, digits and '_', not starting with a digit"))
        elif name in RESERVED_ENV:
            problems.append(Problem(f"env.{name}", shown, f"{where}: env {name} is set by the platform", "env without it"))
        elif isinstance(value, SecretRef):
            problems += _ref_problems(name, value, where)
        elif looks_like_credential(name):
            problems.append(Problem(
                f"env.{name}", shown, f"{where}: {name} looks like a credential, and a plain value is in the stack "
                "file, Pulumi's state and the JobSet for anyone who reads them", f"a Secret reference, {SECRET_FORM} "
                "(kubectl -n <namespace> create secret generic <name> --from-literal=<key>=...)"))
    return problems


def _ref_problems(name: str, ref: SecretRef, where: str) -> list[Problem]:
    problems = []
    why = dns_1123_subdomain_problem(ref.secret)
    if why:
        problems.append(Problem(f"env.{name}.secret", ref.secret, f"{where} {why}", "a Secret's name"))
    key = ref.key
    if not key or len(key) > _SECRET_KEY_MAX or key in (".", "..") or not all(c.isascii() and (c.isalnum() or c in "-_.")
                                                                                for c in key):
        problems.append(Problem(f"env.{name}.key", key, f"{where} is not a key of a Secret's data", _SECRET_KEY))
    return problems


def _strings(run: Any) -> Iterator[tuple[str, str, int]]:
    """(key, shown, bytes) of each string the run's process gets from the stack file."""
    for key, values in (("command", run.command), ("args", run.args)):
        for i, value in enumerate(values):
            yield f"{key}[{i}]", value, utf8_size(value) + 1
    for key, value in (("promptTemplate", run.prompt_template), ("systemPrompt", run.system_prompt)):
        if value is not None:
            yield key, value, utf8_size(value) + 1
    for name, value in run.env.items():
        if isinstance(value, str):
            yield f"env.{name}", value, utf8_size(f"{name}={value}") + 1
    if getattr(run, "mix", ()):  # one argument, --data_mix's JSON (stack/run_mix.py; paths as the pod reads them)
        yield "mix", "[...]", utf8_size(mixture.flag_value([s.flag_entry(f"/data/{s.data}") for s in run.mix])) + 1
    evaluation = getattr(run, "eval", None)
    if evaluation is not None and evaluation.prompts:  # one argument, their JSON (stack/run_export.py export_args)
        yield "eval.prompts", "[...]", utf8_size(json.dumps(list(evaluation.prompts))) + 1


def size_problems(run: Any, where: str) -> list[Problem]:
    """Arguments and environment strings past what Linux lets a process start with."""
    problems, total = [], 0
    for key, value, size in _strings(run):
        total += size
        if size > ARG_STRING_MAX_BYTES + 1:
            problems.append(Problem(key, f"[{size - 1} bytes]", f"{where} is longer than one argument or environment "
                                    f"string of a process may be (Linux MAX_ARG_STRLEN: {ARG_STRING_MAX_BYTES} bytes): "
                                    "the container would never start", f"at most {ARG_STRING_MAX_BYTES} bytes; a "
                                    "larger text goes in a file in the bucket (datasets/)"))
    if total > ARG_TOTAL_MAX_BYTES and not problems:
        problems.append(Problem("args", f"[{total} bytes]", f"{where}: its arguments and environment together are more "
                                f"than a process may start with ({ARG_TOTAL_MAX_BYTES} bytes: a quarter of the 8 MiB "
                                "stack)", "less text on the command line; a file in the bucket instead"))
    return problems
