"""The defaults the provider documents for the inputs a resource leaves unset: judged as if the program set them.

pulumi-gcp's SDK documents an input's default in its docstring ("Defaults to `true`.", "Defaults to
\"inherited\"."), on the resource's Args class and on the Args classes of its blocks
(`pulumi_gcp/<module>/_inputs.py`). `documented(type_token)` reads them from the installed, pinned SDK
(never copied here), each as the input path the mapping tables use (camelCase, blocks joined with dots)
with its value converted to the input's type; a docstring whose default is not one literal of that type
("Defaults to 64 for static port allocation and 32 ...", "Defaults to the provider project") gives none.
`request.build` adds each to the request where the program leaves the input unset and sets its block, if
the mapping has a rule for it; the others are listed as documented but not judged (`unjudged`).
Inputs inside lists of blocks are left out: their defaults would need one copy per item. The policy
pack's environment (policy/requirements.txt) has no pulumi-gcp SDK: there, only what is set is judged.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
from typing import Any


_PARAM = re.compile(r":param (?:pulumi\.Input\[)?(?P<type>.*?)\]? (?P<name>\w+): (?P<text>.*?)(?=\n\s*:param |\Z)", re.S)
_DEFAULT = re.compile(r"\bDefaults? to\s+(?P<value>`[^`]+`|\"[^\"]+\"|'[^']+'|[^\s,;]+?)(?=[\s,;]|\.(?:\s|$)|$)")
_ENUM_LIKE = re.compile(r"[A-Z][A-Z0-9_]+")
MAX_DEPTH = 4


def to_camel(name: str) -> str:
    """A Python input name as the wire form spells it (`node_config` -> `nodeConfig`)."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _literal(kind: str, raw: str) -> Any:
    """The docstring's default as a value of the input's type, or None when it is not one literal of it."""
    quoted = raw[0] in "`\"'" and raw[-1] == raw[0]
    text = raw[1:-1] if quoted else raw
    if kind.endswith("bool"):
        return {"true": True, "false": False}.get(text.lower())
    if kind.endswith("int"):
        return int(text) if re.fullmatch(r"-?[0-9]+", text) else None
    if kind.endswith("str"):
        return text if quoted or _ENUM_LIKE.fullmatch(text) else None
    return None


def _args_class(type_token: str):
    module, _, name = type_token.partition(":")[2].partition(":")
    try:
        return getattr(importlib.import_module(f"pulumi_gcp.{module.split('/')[0]}"), f"{name}Args", None)
    except ModuleNotFoundError:  # the policy pack's environment: no SDK, so only what is set is judged there
        return None


def _block_class(owner, param: str):
    """The Args class of a block input (not a list of blocks), from the constructor's annotation."""
    annotation = inspect.signature(owner.__init__).parameters.get(param)
    text = str(annotation.annotation) if annotation is not None else ""
    if "Sequence" in text or "Mapping" in text:
        return None
    found = re.search(r"(\w+Args)\b", text)
    module = importlib.import_module(owner.__module__.rsplit(".", 1)[0] + "._inputs")
    return getattr(module, found.group(1), None) if found else None


def _walk(cls, prefix: str, depth: int, out: dict[str, Any]) -> None:
    for found in _PARAM.finditer(cls.__init__.__doc__ or ""):
        name, kind, text = found["name"], found["type"], " ".join(found["text"].split())
        path = f"{prefix}{to_camel(name)}"
        default = _DEFAULT.search(text)
        value = _literal(kind.strip(), default["value"]) if default else None
        if value is not None:
            out[path] = value
        if depth < MAX_DEPTH and "Args" in kind:
            block = _block_class(cls, name)
            if block is not None:
                _walk(block, f"{path}.", depth + 1, out)


@functools.cache
def documented(type_token: str) -> dict[str, Any]:
    """Input path -> the default pulumi-gcp's docstrings give it, for one resource type."""
    cls = _args_class(type_token)
    out: dict[str, Any] = {}
    if cls is not None:
        _walk(cls, "", 0, out)
    return dict(sorted(out.items()))
