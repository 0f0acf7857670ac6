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
from stack.secrets import HF_TOKEN_KEY, TokenState, hf_token_problems, needs_hf_token

# Keys whose stack value is structured; Pulumi hands them to the program as JSON.
_STRUCTURED = ("pools", "shapes", "images", "runs", "zones", "network", "datasets", "existingCluster", "charts",
               "imageBuild")
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
        problems += from_validation_error(err)
    if problems:
        raise ConfigError(problems)
    return config


# --- offline: Pulumi.yaml + Pulumi.<stack>.yaml ------------------------------


def file_values(stack: str, root: Path) -> dict[str, Any]:
    """Every config key of `stack` as the CLI would pass it: Pulumi.yaml defaults, then the stack file."""
    project_file = yaml.safe_load((root / "Pulumi.yaml").read_text())
    values: dict[str, Any] = {
        f"{PROJECT}:{k}": d["default"]
        for k, d in (project_file.get("config") or {}).items()
        if isinstance(d, dict) and "default" in d
    }
    values.update(yaml.safe_load((root / f"Pulumi.{stack}.yaml").read_text()).get("config") or {})
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
    return validate(model_values(file_values(stack, root), stack))


# --- in the program: Pulumi config -------------------------------------------


def load() -> StackConfig:
    """Read and validate the current stack's config; raise ConfigError on any problem."""
    merged = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    values = model_values(merged, pulumi.get_stack())
    return validate(values, hf_token_problems(values.get("runs"), _hf_token_state(), values.get("datasets")))


def hf_token(config: StackConfig) -> pulumi.Output[str] | None:
    """The Hugging Face token as a Pulumi secret Output, or None when no run of the stack needs it.

    `load` has already refused a stack whose runs need the token and lack it.
    """
    if not needs_hf_token(config.runs, config.datasets):
        return None
    return pulumi.Config(PROJECT).require_secret(HF_TOKEN_KEY)


def _hf_token_state() -> TokenState:
    # Pulumi.yaml declares the key with an empty default, which the CLI merges
    # in as a plain "" when the stack does not set it: empty means unset.
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
