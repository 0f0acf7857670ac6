"""A request body and its URL parameters against the method's definition in a discovery document.

What Google's API front end refuses before anything else, as its discovery
documents define it: a field the schema doesn't have, a value of the wrong
JSON type, an enum value outside Google's list, a string in the wrong format
(`int64` and `uint64` as decimal strings, `google-duration`, `byte` as
base64, timestamps, field masks), a required field or parameter left out, a
parameter outside its pattern. Output-only fields (Google computes them) are
refused too: the request builders leave them out, so one here means a
mapping that sends what the provider doesn't.

The JSON encoding is proto3's, which Google's REST front end parses
(https://protobuf.dev/programming-guides/json/): 64-bit integers as decimal
strings (numbers accepted), 32-bit ones as numbers (decimal strings
accepted), enums by name, unknown fields rejected ("Invalid JSON payload
received. Unknown name").
"""

from __future__ import annotations

import base64
import binascii
import datetime
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from admission.google_api import discovery
from admission.google_api.values import is_unknown

PROTO_JSON = "https://protobuf.dev/programming-guides/json/"
_RANGES = {"int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1),
           "int64": (-(2**63), 2**63 - 1), "uint64": (0, 2**64 - 1)}
_DECIMAL = re.compile(r"-?[0-9]+")
# google.protobuf.Duration in JSON: seconds, up to nine fractional digits, an "s".
_DURATION = re.compile(r"-?[0-9]+(\.[0-9]{1,9})?s")
# google.protobuf.FieldMask in JSON: comma-separated lowerCamel paths.
_MASK_PATH = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
_FIELD_MASK = re.compile(rf"{_MASK_PATH}(,{_MASK_PATH})*")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_FORMAT_WORDS = {
    "int64": "a 64-bit integer (a decimal string in JSON)",
    "uint64": "an unsigned 64-bit integer (a decimal string in JSON)",
    "int32": "a 32-bit integer",
    "uint32": "an unsigned 32-bit integer",
    "google-duration": "a duration: seconds with up to 9 fractional digits and an 's', e.g. '3600s'",
    "byte": "base64-encoded bytes",
    "date-time": "an RFC 3339 timestamp, e.g. '2026-01-31T12:00:00Z'",
    "google-datetime": "an RFC 3339 timestamp, e.g. '2026-01-31T12:00:00Z'",
    "google-fieldmask": "a field mask: comma-separated lowerCamel paths",
    "date": "a date YYYY-MM-DD",
}


@dataclass(frozen=True)
class Violation:
    """One thing Google's definition refuses: where in the request, the value, why, what Google allows."""

    where: str  # `nodePool.placementPolicy.type`, or `parameter parent`
    value: Any
    why: str
    allowed: str = ""


def body_violations(api: str, method_id: str, body: Mapping[str, Any]) -> list[Violation]:
    """Every violation of the method's request schema by `body`."""
    return list(_value(api, method_id, discovery.request_schema(api, method_id), body, "", ""))


def response_violations(api: str, method_id: str, body: Mapping[str, Any]) -> list[Violation]:
    """Every way `body` (a recorded or stand-in answer) is not what the method's response schema allows: a field
    the schema doesn't have, a wrong JSON type, a value outside an enum or format. Output-only fields are what
    an answer holds; no field is required of one."""
    node = discovery.method(api, method_id).get("response") or {}
    return [v for v in _value(api, method_id, node, body, "", "")
            if "output only" not in v.why and "is required by" not in v.why]


def deprecations(api: str, method_id: str, body: Mapping[str, Any]) -> list[Violation]:
    """The fields and enum values of `body` Google's definition marks deprecated: accepted, but on their way out."""
    return list(_deprecated(api, discovery.request_schema(api, method_id), body, "", ""))


def _deprecated(api: str, node: Mapping[str, Any], value: Any, where: str, owner: str) -> Iterator[Violation]:
    node = discovery.resolve(api, node)
    if isinstance(value, Mapping):
        fields, name = node.get("properties") or {}, node.get("id") or owner
        for key, item in value.items():
            field = fields.get(key)
            if field is None:
                continue
            path = f"{where}.{key}" if where else key
            if field.get("deprecated"):
                yield Violation(path, item, f"is deprecated in Google's {name}", "")
            yield from _deprecated(api, field, item, path, f"{name}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _deprecated(api, node.get("items") or {}, item, f"{where}[{i}]", owner)
    elif isinstance(value, str) and value in (node.get("enum") or ()):
        if (node.get("enumDeprecated") or [False] * len(node["enum"]))[node["enum"].index(value)]:
            yield Violation(where, value, f"is a value Google deprecates for {owner}", "")


def parameter_violations(api: str, method_id: str, params: Mapping[str, Any]) -> list[Violation]:
    """The URL parameters: each known, defined, in its pattern and type; every required one given."""
    defined = discovery.method(api, method_id).get("parameters") or {}
    found = []
    for name, value in params.items():
        spec = defined.get(name)
        where = f"parameter {name}"
        if spec is None:
            found.append(Violation(where, value, f"is not a parameter of {method_id}", ", ".join(sorted(defined))))
        elif not is_unknown(value):
            found += _value(api, method_id, spec, value, where, name)
            pattern = spec.get("pattern")
            if pattern and isinstance(value, str) and not re.fullmatch(pattern, value):
                found.append(Violation(where, value, "is not in the parameter's pattern", pattern))
    for name, spec in sorted(defined.items()):
        if spec.get("required") and name not in params:
            found.append(Violation(f"parameter {name}", None, f"is required by {method_id} and not given"))
    return found


def _value(api: str, method_id: str, node: Mapping[str, Any], value: Any, where: str,
           owner: str) -> Iterator[Violation]:
    """`owner`: the schema (or schema.field) `value` belongs to, named in messages."""
    node = discovery.resolve(api, node)
    if is_unknown(value):
        return
    kind = node.get("type")
    if kind == "object" or "properties" in node or "additionalProperties" in node:
        yield from _object(api, method_id, node, value, where, node.get("id") or owner)
    elif kind == "array":
        if not isinstance(value, list):
            yield Violation(where, value, "is not a list", "a JSON array")
            return
        for i, item in enumerate(value):
            yield from _value(api, method_id, node.get("items") or {}, item, f"{where}[{i}]", owner)
    elif kind == "string":
        yield from _string(api, node, value, where, owner)
    elif kind == "integer":
        yield from _integer(node.get("format", "int32"), value, where)
    elif kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            yield Violation(where, value, "is not a number", node.get("format", "number"))
    elif kind == "boolean":
        if not isinstance(value, bool):
            yield Violation(where, value, "is not a boolean", "true, false")


def _object(api, method_id, node, value, where, name) -> Iterator[Violation]:
    if not isinstance(value, Mapping):
        yield Violation(where, value, "is not an object", f"a JSON object ({name})")
        return
    fields, extra = node.get("properties") or {}, node.get("additionalProperties")
    for key, item in value.items():
        path = f"{where}.{key}" if where else key
        if key in fields:
            if discovery.output_only(fields[key]):
                yield Violation(path, item, f"is output only in Google's {name} (the API computes it)")
            yield from _value(api, method_id, fields[key], item, path, f"{name}.{key}")
        elif extra is not None:
            yield from _value(api, method_id, extra, item, f"{where}[{key}]" if where else key, f"{name} value")
        else:
            yield Violation(path, item, f"is not a field of Google's {name}", ", ".join(sorted(fields)))
    for key, field in sorted(fields.items()):
        if key not in value and discovery.required(field, method_id):
            yield Violation(f"{where}.{key}" if where else key, None, f"is required by Google's {name} in {method_id}")


def _string(api: str, node: Mapping[str, Any], value: Any, where: str, owner: str) -> Iterator[Violation]:
    fmt = node.get("format", "")
    if fmt in ("int64", "uint64"):
        yield from _integer(fmt, value, where)
        return
    if not isinstance(value, str):
        yield Violation(where, value, "is not a string", _FORMAT_WORDS.get(fmt, "a JSON string"))
        return
    allowed = node.get("enum") or discovery.described_values(api, owner, node)
    if allowed and value not in allowed:
        yield Violation(where, value, f"is not a value Google lists for {owner}", ", ".join(allowed))
    if fmt and not _in_format(fmt, value):
        yield Violation(where, value, f"is not {_FORMAT_WORDS.get(fmt, fmt)}", fmt)


def _integer(fmt: str, value: Any, where: str) -> Iterator[Violation]:
    """An integer as proto3 JSON takes it: a JSON number or a decimal string, within the format's range."""
    low, high = _RANGES.get(fmt, _RANGES["int64"])
    if isinstance(value, str) and _DECIMAL.fullmatch(value):
        number = int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        yield Violation(where, value, f"is not {_FORMAT_WORDS.get(fmt, 'an integer')}", fmt)
        return
    if not low <= number <= high:
        yield Violation(where, value, f"is outside the range of {fmt}", f"{low} to {high}")


def _in_format(fmt: str, value: str) -> bool:
    if fmt == "google-duration":
        return bool(_DURATION.fullmatch(value))
    if fmt == "google-fieldmask":
        return value == "" or bool(_FIELD_MASK.fullmatch(value))
    if fmt == "byte":
        return _is_base64(value)
    if fmt in ("date-time", "google-datetime"):
        return _is_timestamp(value)
    if fmt == "date":
        return bool(_DATE.fullmatch(value)) and _is_timestamp(value + "T00:00:00Z")
    return True  # formats that add nothing to the JSON type (double, float, ...)


def _is_base64(value: str) -> bool:
    """Standard or URL-safe base64, padded or not, as proto3 JSON parsers accept bytes."""
    text = value.replace("-", "+").replace("_", "/")
    try:
        base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _is_timestamp(value: str) -> bool:
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+(Z|[+-][0-9]{2}:[0-9]{2})", value):
        return False
    try:
        datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True
