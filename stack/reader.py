"""The one reader of stack files.

Two sources give the same mapping of the project's keys, and one function
validates it:
- in the program, `pulumi.Config` as the CLI hands it over (Pulumi.yaml
  defaults merged with Pulumi.<stack>.yaml, structured values as JSON);
- offline (the plan, the goldens, the tests), the same two files read from
  disk and merged the same way, each value made the text the CLI hands over
  (`cli_text`).
Both read the files through the one YAML loader (stack/yaml_loader.py): offline
for their values, the program to refuse what the CLI would read otherwise than
the commands do (`file_problems`), so a file one refuses, the other does too.
Nothing else in the project reads a stack file or Pulumi config.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pulumi
import pulumi.runtime.config as runtime_config

from core.names import PROJECT
from stack.config import StackConfig
from stack.problems import ConfigError, Problem, from_validation_error
from stack.rules import placeholder_problems
from stack.serving import placeholder_problems as serve_placeholder
from stack.secrets import HF_TOKEN_KEY, TokenState, file_token_state, hf_token_problems
from stack.yaml_loader import StackFileError, YamlDocument, load_yaml

# Keys whose stack value is structured; Pulumi hands them to the program as JSON.
_STRUCTURED = ("pools", "shapes", "images", "runs", "zones", "network", "datasets", "existingCluster", "charts",
               "imageBuild", "kueue", "serve")
_NOT_MODEL_KEYS = (HF_TOKEN_KEY,)
_GCP_KEYS = {"gcp:project": "project", "gcp:region": "region"}


def validate(values: dict[str, Any], extra: list[Problem] | None = None, root: Path | None = None) -> StackConfig:
    """The StackConfig of a mapping of the project's keys, or a ConfigError listing every problem. `root`: the
    project's directory, below which a dataset's `path` must be (default: the current directory, where the
    CLI runs the program)."""
    problems = list(extra or [])
    config = None
    try:
        config = StackConfig.model_validate(values, context={"root": (root or Path.cwd()).resolve()})
    except Exception as err:  # a pydantic ValidationError
        if not hasattr(err, "errors"):
            raise
        problems += from_validation_error(err, StackConfig)
    if problems:
        raise ConfigError(problems)
    return config


# --- offline: Pulumi.yaml + Pulumi.<stack>.yaml ------------------------------


def read_file(path: Path) -> dict[str, Any]:
    """The `config:` mapping of a Pulumi project or stack file; StackFileError when it is not one."""
    return _config_of(load_yaml(path))


def _config_of(document: YamlDocument) -> dict[str, Any]:
    name = document.name
    if document.data is None:
        return {}
    if not isinstance(document.data, dict):
        raise StackFileError(f"{name}:1:1: is a YAML {type(document.data).__name__}; "
                             "a stack file is a mapping with a `config:` key")
    config = document.data.get("config") or {}
    if not isinstance(config, dict):
        raise StackFileError(f"{name}: `config` is a YAML {type(config).__name__}; it must be a mapping of keys")
    return config


def stack_file(stack: str, root: Path) -> Path:
    """Pulumi.<stack>.yaml in `root`; StackFileError naming the stacks there when there is none."""
    path = root / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        names = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in root.glob("Pulumi.*.yaml"))
        raise StackFileError(f"{path.name}: no such stack file in {root}; stacks: {', '.join(names) or 'none'}")
    return path


def file_values(stack: str, root: Path) -> dict[str, Any]:
    """Every config key of `stack` as written: Pulumi.yaml defaults, then the stack file (file_problems checks
    each against its declared type)."""
    values: dict[str, Any] = {
        f"{PROJECT}:{k}": d["default"]
        for k, d in read_file(root / "Pulumi.yaml").items()
        if isinstance(d, dict) and "default" in d
    }
    values.update(read_file(stack_file(stack, root)))
    return values


def model_values(config_map: dict[str, Any], stack: str) -> dict[str, Any]:
    """The StackConfig mapping of a config map (`<namespace>:<key>` keys): each value the text the CLI hands
    the program (`cli_text`), structured ones decoded from it."""
    values: dict[str, Any] = {"project": "", "region": "", "stack": stack}
    prefix = f"{PROJECT}:"
    for key, raw in config_map.items():
        if key in _GCP_KEYS:
            values[_GCP_KEYS[key]] = cli_text(raw)
        elif key.startswith(prefix) and key[len(prefix):] not in _NOT_MODEL_KEYS:
            values[key[len(prefix):]] = _decode(key[len(prefix):], cli_text(raw))
    return values


def cli_text(value: Any) -> str:
    """A value of the stack file as the Pulumi CLI hands it to the program: text as it is, a boolean or number
    as its text, anything else as JSON (sdk/go/common/resource/config/object.go `MarshalString`: Go's JSON,
    whose floats print without a fraction when whole, so that `1.0` reaches the program as 1)."""
    return value if isinstance(value, str) else json.dumps(_go_numbers(value))


def _go_numbers(value: Any) -> Any:
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    if isinstance(value, dict):
        return {k: _go_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_go_numbers(v) for v in value]
    return value


def load_files(stack: str, root: Path) -> StackConfig:
    """The stack's config read offline from `root`'s Pulumi.yaml and Pulumi.<stack>.yaml."""
    values = file_values(stack, root)
    raise_file_problems(stack, root)
    retired = hf_token_problems(file_token_state(values.get(f"{PROJECT}:{HF_TOKEN_KEY}")))
    return validate(model_values(values, stack), retired, root)


# --- the file as written ------------------------------------------------------

# What a declared type allows as the stack file writes it: the CLI would make a number text for a `string`
# key (pkg/workspace/config.go `validateStackConfigValue`), which a person reading `namespace: 12345` doesn't
# expect; everything else it would refuse too (sdk/go/common/workspace/project.go `ValidateConfigValue`).
_AS_WRITTEN = {
    "string": (lambda v: isinstance(v, str), "text (quote it if it looks like a number or a boolean)"),
    "integer": (lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, str) and v.isdigit()),
                "a whole number"),
    "boolean": (lambda v: isinstance(v, bool) or v in ("true", "false"), "true or false"),
    "array": (lambda v: isinstance(v, list), "a list"),
    "object": (lambda v: isinstance(v, dict), "a mapping"),
}


def _kind(value: Any) -> str:
    return {bool: "a boolean", int: "a number", float: "a number", str: "text", list: "a list",
            dict: "a mapping"}.get(type(value), type(value).__name__)


def file_problems(stack: str, root: Path) -> list[str]:
    """What the stack file says that the CLI would read otherwise than the commands, or refuse: each as
    `<file>:<line>:<column>: <key>: <value> is <kind>; ...`. Unreadable YAML raises StackFileError."""
    declared = {f"{PROJECT}:{k}": d.get("type") for k, d in read_file(root / "Pulumi.yaml").items()
                if isinstance(d, dict)}
    document = load_yaml(stack_file(stack, root))
    config = _config_of(document)
    found = []
    for key, value in config.items():
        if isinstance(value, dict) and set(value) == {"secure"}:
            continue  # an encrypted value: text to the program
        rule = _AS_WRITTEN.get(declared.get(key) or ("string" if value is None else ""))
        if rule is None or (value is not None and rule[0](value)):
            continue
        mark = document.mark_of("config", key)
        where = f"{document.name}:{mark.line + 1}:{mark.column + 1}" if mark else document.name
        if value is None:
            found.append(f"{where}: {key}: has no value; give it {rule[1]}, or remove the key")
        else:
            found.append(f"{where}: {key}: {json.dumps(value)} is {_kind(value)}; the key is {rule[1]}")
    return found


def raise_file_problems(stack: str, root: Path) -> None:
    found = file_problems(stack, root)
    if found:
        raise ConfigError(found)


# --- in the program: Pulumi config -------------------------------------------


class StackRefused(ConfigError, pulumi.RunError):
    """A ConfigError that the Pulumi language host reports as the message alone: pulumi-language-python-exec
    logs a RunError's text as one error, with no traceback, and exits 1 (sdk/python/cmd/
    pulumi-language-python-exec, `except pulumi.RunError as e: pulumi.log.error(str(e))`)."""

    unreadable = False  # the stack file isn't YAML the CLI reads as the commands do
    stack = ""

    def __str__(self) -> str:
        text = self.problems[0] if self.unreadable else super().__str__()
        return f"stack {self.stack}: {text}" if self.stack and not self.unreadable else text


def refused(err: ConfigError) -> StackRefused:
    """`err` as the program raises it, naming the stack (the offline plan and the tests still catch a
    ConfigError)."""
    found = StackRefused(err.items)
    found.unreadable = isinstance(err, StackFileError)
    found.stack = pulumi.get_stack()
    if found.unreadable:
        found.args = err.args
    return found


def load(project_dir: Path | None = None) -> StackConfig:
    """Read and validate the current stack's config; raise ConfigError on any problem. `project_dir` (default:
    the current directory, where the CLI runs the program) holds the stack file the CLI read, which the
    commands' loader reads too."""
    stack = pulumi.get_stack()
    project_dir = project_dir or Path.cwd()
    if (project_dir / f"Pulumi.{stack}.yaml").is_file():
        raise_file_problems(stack, project_dir)
    merged = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    values = model_values(merged, stack)
    problems = hf_token_problems(_hf_token_state())
    if applying():
        problems += placeholder_problems(str(values.get("project", ""))) + serve_placeholder(values.get("serve"))
    return validate(values, problems, project_dir)


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
