"""The one reader of stack files.

Two sources give the same mapping of the project's keys, and one function
validates it:
- in the program, `pulumi.Config` as the CLI hands it over (Pulumi.yaml
  defaults merged with Pulumi.<stack>.yaml, structured values as JSON);
- offline (the plan, the goldens, the tests), the same two files read from
  disk and merged the same way.
Nothing else in the project reads a stack file or Pulumi config.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pulumi
import pulumi.runtime.config as runtime_config
import yaml

from core.names import PROJECT
from stack.config import StackConfig
from stack.problems import ConfigError, Problem, from_validation_error
from stack.rules import placeholder_problems
from stack.serving import placeholder_problems as serve_placeholder
from stack.secrets import HF_TOKEN_KEY, TokenState, file_token_state, hf_token_problems

# Keys whose stack value is structured; Pulumi hands them to the program as JSON.
_STRUCTURED = ("pools", "shapes", "images", "runs", "zones", "network", "datasets", "existingCluster", "charts",
               "imageBuild", "serve")
_NOT_MODEL_KEYS = (HF_TOKEN_KEY,)
_GCP_KEYS = {"gcp:project": "project", "gcp:region": "region"}


def validate(values: dict[str, Any], extra: list[Problem] | None = None) -> StackConfig:
    """The StackConfig of a mapping of the project's keys, or a ConfigError listing every problem."""
    problems = list(extra or [])
    config = None
    try:
        config = StackConfig.model_validate(values)
    except Exception as err:  # a pydantic ValidationError
        if not hasattr(err, "errors"):
            raise
        problems += from_validation_error(err, StackConfig)
    if problems:
        raise ConfigError(problems)
    return config


# --- offline: Pulumi.yaml + Pulumi.<stack>.yaml ------------------------------


class StackFileError(ConfigError):
    """A stack file (or Pulumi.yaml) that can't be read as one: one line, `<file>:<line>:<column>: <what>`,
    as compilers print it, so that an editor jumps to the spot and a tool reading many files names the one."""

    def __init__(self, line: str):
        super().__init__([line])
        self.args = (line,)

    def __str__(self) -> str:
        return self.problems[0]


def read_file(path: Path) -> dict[str, Any]:
    """The `config:` mapping of a Pulumi project or stack file; StackFileError when it is not one."""
    try:
        document = yaml.safe_load(path.read_text())
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"{path.name}:{mark.line + 1}:{mark.column + 1}" if mark else path.name
        what = ": ".join(part for part in (err.context, err.problem) if part)
        raise StackFileError(f"{where}: not valid YAML: {what}") from None
    except yaml.YAMLError as err:
        raise StackFileError(f"{path.name}: not valid YAML: {err}") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise StackFileError(f"{path.name}:1:1: is a YAML {type(document).__name__}; "
                             "a stack file is a mapping with a `config:` key")
    config = document.get("config") or {}
    if not isinstance(config, dict):
        raise StackFileError(f"{path.name}: `config` is a YAML {type(config).__name__}; it must be a mapping of keys")
    return config


def file_values(stack: str, root: Path) -> dict[str, Any]:
    """Every config key of `stack` as the CLI would pass it: Pulumi.yaml defaults, then the stack file."""
    values: dict[str, Any] = {
        f"{PROJECT}:{k}": d["default"]
        for k, d in read_file(root / "Pulumi.yaml").items()
        if isinstance(d, dict) and "default" in d
    }
    values.update(read_file(root / f"Pulumi.{stack}.yaml"))
    return values


def model_values(config_map: dict[str, Any], stack: str) -> dict[str, Any]:
    """The StackConfig mapping of a config map (`<namespace>:<key>` keys), structured values decoded."""
    values: dict[str, Any] = {"project": "", "region": "", "stack": stack}
    prefix = f"{PROJECT}:"
    for key, raw in config_map.items():
        if key in _GCP_KEYS:
            values[_GCP_KEYS[key]] = raw
        elif key.startswith(prefix) and key[len(prefix):] not in _NOT_MODEL_KEYS:
            values[key[len(prefix):]] = _decode(key[len(prefix):], raw)
    return values


def load_files(stack: str, root: Path) -> StackConfig:
    """The stack's config read offline from `root`'s Pulumi.yaml and Pulumi.<stack>.yaml."""
    values = file_values(stack, root)
    retired = hf_token_problems(file_token_state(values.get(f"{PROJECT}:{HF_TOKEN_KEY}")))
    return validate(model_values(values, stack), retired)


# --- in the program: Pulumi config -------------------------------------------


def load() -> StackConfig:
    """Read and validate the current stack's config; raise ConfigError on any problem."""
    merged = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    values = model_values(merged, pulumi.get_stack())
    problems = hf_token_problems(_hf_token_state())
    if applying():
        problems += placeholder_problems(str(values.get("project", ""))) + serve_placeholder(values.get("serve"))
    return validate(values, problems)


def applying() -> bool:
    """Whether this is a real `pulumi up` (or destroy): not a preview, and not the SDK's mocks, under which
    the offline plan and the tests run the program as `up` too."""
    from pulumi.runtime.mocks import MockMonitor  # pylint: disable=import-outside-toplevel

    return not pulumi.runtime.is_dry_run() and not isinstance(pulumi.runtime.settings.get_monitor(), MockMonitor)


def _hf_token_state() -> TokenState:
    """How the stack holds the retired `hfToken` (refused in any form). Pulumi.yaml declares the key with an
    empty default, which the CLI merges in as a plain "" when the stack does not set it: empty means unset."""
    key = f"{PROJECT}:{HF_TOKEN_KEY}"
    if not pulumi.runtime.get_config(key):
        return "unset"
    return "secret" if pulumi.runtime.is_config_secret(key) else "plain"


def _decode(key: str, raw: Any) -> Any:
    if key in _STRUCTURED and isinstance(raw, str):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw  # pydantic reports the type mismatch with the value
    return raw
