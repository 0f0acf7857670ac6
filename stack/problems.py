"""What is wrong with a stack file: one `Problem` per mistake, rendered in one place.

Every rule of the stack layer returns `Problem`s; validators raise them as
`Problems` (a ValueError pydantic carries through nested models), and
`ConfigError` collects them, each rendered as

    <key path>: <value> <why>; allowed: <allowed>

so a user reads the key to fix, what they wrote, and what would be accepted.
"""

from __future__ import annotations

import difflib
import re
import typing
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


# The value of a key that is not set.
MISSING: Any = _Missing()


class _Null:
    def __repr__(self) -> str:
        return "null"


# The value of a key set to YAML's null (`key:` with nothing after it), as the file writes it.
NULL: Any = _Null()
# Top-level keys that the stack file spells in another namespace.
_TOP_LEVEL_ALIASES = {"project": "gcp:project", "region": "gcp:region"}


@dataclass(frozen=True)
class Problem:
    key: str  # the key path, e.g. `pools[0].autoscaling.minNodes` or `runs[1].args`
    value: Any  # what the stack file says there (MISSING when unset)
    why: str
    allowed: str = ""

    def __str__(self) -> str:
        allowed = f"; allowed: {self.allowed}" if self.allowed else ""
        value = "not set," if self.value is MISSING else _shown(self.value)
        return f"{self.key}: {value} {self.why}{allowed}"

    def under(self, path: str) -> Problem:
        """This problem with its key taken relative to `path`."""
        if not path:
            return self
        if not self.key:
            return replace(self, key=path)
        joined = f"{path}{self.key}" if self.key.startswith("[") else f"{path}.{self.key}"
        return replace(self, key=joined)


class Problems(ValueError):
    """Raised by validators: the problems of one value, keys relative to it."""

    def __init__(self, problems: Iterable[Problem]):
        self.items = list(problems)
        super().__init__("\n".join(map(str, self.items)))


class ConfigError(ValueError):
    """The stack file is invalid. `problems` holds one rendered line per problem."""

    def __init__(self, problems: Iterable[Problem | str]):
        self.items = [p for p in problems]
        self.problems = [str(p) for p in self.items]
        super().__init__("invalid stack configuration:\n" + "\n".join(f"  - {p}" for p in self.problems))


def raise_problems(problems: Iterable[Problem]) -> None:
    problems = list(problems)
    if problems:
        raise Problems(problems)


def from_validation_error(err: ValidationError, model: type | None = None) -> list[Problem]:
    """pydantic's errors as Problems, keyed by the stack file's key paths; an unknown key of `model` (the
    stack's root model) names the closest key it may be a typo of."""
    found = []
    for e in err.errors():
        path = key_path(e["loc"])
        error = e.get("ctx", {}).get("error")
        if isinstance(error, Problems):
            found += [p.under(path) for p in error.items]
        elif e["type"] == "extra_forbidden":
            found.append(unknown_key(path, e["loc"], e.get("input"), model))
        elif e["type"] == "missing":
            found.append(Problem(path, MISSING, "and it is required"))
        elif e["type"] in _TYPES:
            given = e.get("input")
            found.append(Problem(path, NULL if given is None else given, f"is {kind_of(given)}", _TYPES[e["type"]]))
        else:
            found.append(Problem(path, e.get("input"), _lower_first(e["msg"])))
    return found


# pydantic's type errors, as what the key allows.
_TYPES = {
    "string_type": "text (quote a number or a boolean to make it text)",
    "bool_type": "true or false",
    "int_type": "a whole number", "int_from_float": "a whole number", "int_parsing": "a whole number",
    "float_type": "a number", "dict_type": "a mapping", "model_type": "a mapping", "model_attributes_type": "a mapping",
    "list_type": "a list", "tuple_type": "a list",
}


def kind_of(value: Any) -> str:
    """What a stack file's value is, in its words: text, a number, a boolean, a list, a mapping, no value."""
    if value is None:
        return "no value"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, (list, tuple)):
        return "a list"
    return "a mapping" if isinstance(value, dict) else type(value).__name__


def unknown_key(path: str, loc: tuple, value: Any, model: type | None) -> Problem:
    """`<path>: <value> is an unknown key; did you mean '<key>'?` with the keys allowed there."""
    allowed = allowed_keys(model, loc[:-1]) if model is not None else None
    if not allowed:
        return Problem(path, value, "is an unknown key", "the keys Pulumi.yaml declares")
    close = difflib.get_close_matches(str(loc[-1]), allowed, n=1, cutoff=0.6)
    why = "is an unknown key" + (f"; did you mean {close[0]!r}?" if close else "")
    listed = ", ".join(sorted(allowed)) if len(loc) > 1 else "the keys Pulumi.yaml declares"
    return Problem(path, value, why, listed)


def allowed_keys(model: type, loc: tuple) -> list[str]:
    """The keys (aliases) of the model at `loc` below `model`, following nested models, lists and optionals."""
    current = model
    for part in loc:
        if isinstance(part, int):
            continue
        fields = getattr(current, "model_fields", None)
        field = next((f for name, f in (fields or {}).items() if (f.alias or name) == part or name == part), None)
        current = _model_in(field.annotation) if field is not None else None
        if current is None:
            return []
    fields = getattr(current, "model_fields", None) or {}
    return [f.alias or name for name, f in fields.items()]


def _model_in(annotation: Any) -> type | None:
    """The pydantic model an annotation holds (itself, or inside tuple[...], list[...], X | None, dict[str, X])."""
    if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def key_path(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not re.fullmatch(r"[\w-]+", str(part)) or "[" in str(part):
            continue  # pydantic's union/function markers, not a key of the file
        else:
            out += f".{part}" if out else _TOP_LEVEL_ALIASES.get(str(part), str(part))
    return out


def _shown(value: Any) -> str:
    """A value as the stack file spells it: YAML's true/false, Python's repr otherwise."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]
