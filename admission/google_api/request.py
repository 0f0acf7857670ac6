"""The request a declared resource becomes: its inputs walked through its mapping table.

`build(mapping, name, inputs)` returns the URL parameters and the body the
provider would send to create the resource: what the program sets (and what
the provider derives from it), and, for an input the program leaves unset in
a block it sets, the default pulumi-gcp documents for it (defaults.py) where
the mapping places that input; plus, for each body field, the input it came
from. What no rule covers is listed as `uncovered` and still placed under its
nearest mapped parent by its own name, so Google's definition judges it too (a
misspelt field is then Google's "unknown field").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from admission.google_api.defaults import documented
from admission.google_api.rules import Field, NotSendable, NotSent, Param, ResourceMapping, autoname
from admission.google_api.values import UNKNOWN, is_unknown, wire

_SEGMENT = re.compile(r"([^\[\]]+)(?:\[(\d+)\])?")


@dataclass(frozen=True)
class Refusal:
    """A value the provider refuses before any request, or two inputs sent to one field."""

    input_path: str
    value: Any
    why: str
    allowed: str = ""


@dataclass
class Request:
    mapping: ResourceMapping
    name: str  # the Pulumi resource name
    params: dict[str, Any] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)  # API path -> the input path it came from
    uncovered: list[tuple[str, Any]] = field(default_factory=list)  # (input path, value) no rule covers
    refusals: list[Refusal] = field(default_factory=list)
    not_sent: list[str] = field(default_factory=list)  # input paths only the provider reads
    used: dict[str, str] = field(default_factory=dict)  # input pattern -> where it goes (coverage)
    defaults: dict[str, str] = field(default_factory=dict)  # documented default judged: input path -> where it goes
    unjudged: dict[str, str] = field(default_factory=dict)  # documented default not judged: input path -> why


def build(mapping: ResourceMapping, name: str, inputs: Mapping[str, Any]) -> Request:
    inputs = wire(dict(inputs))
    named = mapping.autoname and "name" not in inputs
    if named:
        inputs["name"] = autoname(name)
    request, parts = Request(mapping, name), {}
    walk = _Walk(mapping, inputs, request, parts)
    walk.walk(inputs, "", "", ())
    _add_defaults(walk, inputs)
    if named:
        request.used["name"] += " (the bridge names it)"
    for param, template in mapping.params.items():
        needed = re.findall(r"\{(\w+)\}", template)
        known = all(p in parts and not is_unknown(parts[p]) for p in needed)
        request.params[param] = template.format(**parts) if known else UNKNOWN
    return request


DEFAULT = " (documented default)"
# Inputs of every pulumi-gcp resource that no request carries: what `destroy` does (the provider's
# deletion_policy, "Defaults to DELETE").
BRIDGE_ONLY = {"deletionPolicy": NotSent("what `destroy` does with the resource: the provider's, never sent")}


def _add_defaults(walk: "_Walk", inputs: Mapping[str, Any]) -> None:
    """Each documented default of an input left unset in a block the program sets, where its rule sends it."""
    request = walk.request
    for path, value in documented(walk.mapping.type).items():
        parent, _, leaf = path.rpartition(".")
        block = _at(inputs, parent) if parent else inputs
        if not isinstance(block, Mapping) or leaf in block:
            continue
        rule = walk.mapping.fields.get(path) or BRIDGE_ONLY.get(path)
        if isinstance(rule, (Field, Param)):
            request.defaults[path] = _destination(walk.mapping, rule)
            walk.apply(rule, value, path + DEFAULT, ())
        else:
            request.unjudged[path] = "the provider does not send it" if isinstance(rule, NotSent) else "no rule"


def _at(inputs: Mapping[str, Any], path: str) -> Any:
    node: Any = inputs
    for key in path.split("."):
        node = node.get(key) if isinstance(node, Mapping) else None
    return node


def api_path(to: str, indices: tuple[int, ...]) -> str:
    """`to` with each `[]` replaced by the next of `indices`."""
    queue = list(indices)
    return re.sub(r"\[\]", lambda _: f"[{queue.pop(0)}]", to)


class _Walk:
    def __init__(self, mapping: ResourceMapping, inputs: Mapping[str, Any], request: Request, parts: dict):
        self.mapping, self.inputs, self.request, self.parts = mapping, inputs, request, parts
        self.parents = _mapped_parents(mapping)

    def walk(self, value: Any, pattern: str, concrete: str, indices: tuple[int, ...]) -> None:
        for to, implied in self.mapping.implied.get(pattern, ()):
            self.put(api_path(to, indices), implied, concrete)
        rule = self.mapping.fields.get(pattern)
        if rule is not None:
            self.request.used[pattern] = _destination(self.mapping, rule)
            self.apply(rule, value, concrete, indices)
        elif isinstance(value, Mapping) and (value or self.rules_under(pattern)):
            for key, item in value.items():
                self.walk(item, _join(pattern, key), _join(concrete, key), indices)
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            for i, item in enumerate(value):
                self.walk(item, f"{pattern}[]", f"{concrete}[{i}]", (*indices, i))
        elif self.rules_under(pattern) and (is_unknown(value) or value == []):
            return  # a block not known yet, or an empty list of blocks: nothing to send
        else:
            self.uncovered(value, pattern, concrete, indices)

    def rules_under(self, pattern: str) -> bool:
        return any(p.startswith(f"{pattern}.") or p.startswith(f"{pattern}[]") for p in self.mapping.fields)

    def apply(self, rule, value: Any, concrete: str, indices: tuple[int, ...]) -> None:
        if isinstance(rule, NotSent):
            self.request.not_sent.append(concrete)
            return
        if rule.convert is not None and not is_unknown(value):
            try:
                value = rule.convert(value, self.inputs)
            except NotSendable as refused:
                self.request.refusals.append(Refusal(concrete, value, refused.why, refused.allowed))
                return
        if isinstance(rule, Param):
            self.parts[rule.part] = value
            self.request.origins.setdefault(f"parameter {_param_of(self.mapping, rule.part)}", concrete)
        elif isinstance(rule, Field):
            self.put(api_path(rule.to, indices), value, concrete)

    def uncovered(self, value: Any, pattern: str, concrete: str, indices: tuple[int, ...]) -> None:
        self.request.uncovered.append((concrete, value))
        parent = next((p for p in _ancestors(pattern) if p in self.parents), None)
        if parent is not None:
            rest = pattern[len(parent):].lstrip(".")
            self.put(api_path(_join(self.parents[parent], rest), indices), value, concrete)

    def put(self, path: str, value: Any, origin: str) -> None:
        """Set `path` (dots, `[i]` list indices) in the body, refusing a second input on one field."""
        segments = path.split(".")
        holder: Any = self.request.body
        for n, segment in enumerate(segments):
            key, index = _segment(segment)
            last = n == len(segments) - 1
            if index is None and last:
                return self._set(holder, key, value, path, origin)
            default = {} if index is None else []
            if not isinstance(holder.setdefault(key, default), type(default)):
                return self._set(holder, key, value, path, origin)  # a value already there: refused as twice set
            holder = holder[key]
            if index is not None:
                holder.extend({} for _ in range(index + 1 - len(holder)))
                if last:
                    return self._set(holder, index, value, path, origin)
                holder = holder[index]

    def _set(self, holder, key, value: Any, path: str, origin: str) -> None:
        earlier = self.request.origins.get(path)
        if earlier is not None and earlier != origin:
            self.request.refusals.append(Refusal(
                origin, value, f"is sent to {path}, which {earlier} sets too: the provider takes one of them"))
            return
        holder[key] = value
        self.request.origins[path] = origin


def _destination(mapping: ResourceMapping, rule) -> str:
    if isinstance(rule, Field):
        return rule.to
    if isinstance(rule, Param):
        return f"parameter {_param_of(mapping, rule.part)}"
    return "not sent"


def _mapped_parents(mapping: ResourceMapping) -> dict[str, str]:
    """Input block -> API object, where the table sends a block's fields there under their own names."""
    parents: dict[str, str] = {}
    conflicting: set[str] = set()
    for path, rule in mapping.fields.items():
        if not isinstance(rule, Field):
            continue
        src_parent, _, src_leaf = path.rpartition(".")
        to_parent, _, to_leaf = rule.to.rpartition(".")
        if src_leaf != to_leaf or src_parent.count("[]") != to_parent.count("[]") or "[0]" in rule.to:
            continue
        if parents.setdefault(src_parent, to_parent) != to_parent:
            conflicting.add(src_parent)
    return {k: v for k, v in parents.items() if k not in conflicting}


def _ancestors(pattern: str) -> list[str]:
    """`a.b[].c` -> ["a.b[]", "a", ""]: its blocks, innermost first."""
    parts = pattern.split(".")
    return [".".join(parts[:n]) for n in range(len(parts) - 1, -1, -1)]


def _param_of(mapping: ResourceMapping, part: str) -> str:
    return next((p for p, t in mapping.params.items() if "{" + part + "}" in t), part)


def _segment(segment: str) -> tuple[str, int | None]:
    """`taints[0]` -> ("taints", 0); `effect` -> ("effect", None)."""
    found = _SEGMENT.fullmatch(segment)
    if found is None:
        raise ValueError(f"not a path segment: {segment!r}")
    return found.group(1), None if found.group(2) is None else int(found.group(2))


def _join(base: str, key: str) -> str:
    return f"{base}.{key}" if base else key
