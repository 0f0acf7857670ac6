"""Every Google Cloud input the components' source can set has a rule, branches no stack takes included.

The stacks' coverage test (test_google_api_stacks.py) sees what the program
declares for the stacks and variants it runs; this one reads components/
itself: each `gcp.<module>.<Resource>(...)` and `gcp.<module>.<...>Args(...)`
call, each keyword of it (and of the `dict(...)` a helper of the same module
returns into a `**` splat), placed at its input path by pulumi_gcp's own
input types (their properties' wire names and the Args types their
annotations name), must meet a rule of the mapping.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
from pathlib import Path

import pulumi_gcp as gcp
import pytest

from admission.google_api.judge import MAPPINGS

ROOT = Path(__file__).resolve().parents[2]
COMPONENTS = sorted((ROOT / "components").glob("*.py"))
_ARGS_REF = re.compile(r"ForwardRef\('(\w+Args)'\)")


def _resource_token(cls) -> str | None:
    """The type token a pulumi_gcp resource class registers (its `_internal_init` names it)."""
    found = re.search(r"'(gcp:[^']+)'", inspect.getsource(cls._internal_init))
    return found.group(1) if found else None


def _inputs_of(args_cls) -> dict[str, tuple[str, str | None, bool]]:
    """snake_case keyword -> (wire name, the Args type it takes or None, whether a list of them)."""
    params = inspect.signature(args_cls.__init__).parameters
    out = {}
    for name, prop in vars(args_cls).items():
        if isinstance(prop, property) and hasattr(prop.fget, "_pulumi_name") and name in params:
            annotation = str(params[name].annotation)
            nested = _ARGS_REF.search(annotation)
            is_list = annotation.split("ForwardRef", 1)[0].count("Sequence[") > 0
            out[name] = (prop.fget._pulumi_name, nested.group(1) if nested else None, is_list)
    return out


@functools.cache
def placements() -> dict[str, tuple[str, str]]:
    """Args type name -> (resource type token, the input path its fields sit under), for mapped resources."""
    placed: dict[str, tuple[str, str]] = {}
    for token in MAPPINGS:
        module, cls_name = token.split(":")[1].split("/")[0], token.split(":")[2]
        resource = getattr(getattr(gcp, module), cls_name)
        assert _resource_token(resource) == token, f"pulumi_gcp's {module}.{cls_name} is not {token}"
        stack = [(f"{cls_name}Args", resource, "")]
        while stack:
            args_name, owner, prefix = stack.pop()
            if args_name in placed:
                continue
            placed[args_name] = (token, prefix)
            args_cls = getattr(inspect.getmodule(owner), args_name, None) or getattr(
                getattr(gcp, module), args_name)
            for wire, nested, is_list in _inputs_of(args_cls).values():
                if nested:
                    path = f"{prefix}.{wire}" if prefix else wire
                    stack.append((nested, owner, path + ("[]" if is_list else "")))
    return placed


def _args_class(name: str):
    for token in MAPPINGS:
        module = getattr(gcp, token.split(":")[1].split("/")[0])
        if hasattr(module, name):
            return getattr(module, name)
    raise LookupError(name)


def _gcp_calls(tree: ast.Module):
    """(class name, keywords) of each `gcp.<module>.<Name>(...)`, `**helper()` dict splats expanded."""
    helpers = {f.name: f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        chain = node.func.value
        if not (isinstance(chain, ast.Attribute) and isinstance(chain.value, ast.Name) and chain.value.id == "gcp"):
            continue
        if not node.func.attr[:1].isupper():
            continue  # an invoke (gcp.container.get_cluster_output): a read, not a declared resource
        keywords = []
        for kw in node.keywords:
            if kw.arg is not None:
                keywords.append(kw.arg)
            else:
                keywords += _splatted(kw.value, helpers)
        yield node.func.attr, keywords


def _splatted(value: ast.expr, helpers: dict[str, ast.FunctionDef]) -> list[str]:
    """The keys of `**self._common(args)`: the keywords of the `dict(...)` that helper returns."""
    name = value.func.attr if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) else (
        value.func.id if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) else None)
    helper = helpers.get(name)
    returned = [n.value for n in ast.walk(helper) if isinstance(n, ast.Return)] if helper else []
    keys = [kw.arg for r in returned if isinstance(r, ast.Call) and getattr(r.func, "id", "") == "dict"
            for kw in r.keywords]
    if not keys:
        raise AssertionError(f"a ** splat this test can't read: {ast.unparse(value)}")
    return keys


def source_gaps(sources: dict[str, str]) -> list[str]:
    """`file: Class.keyword -> type input.path` for each keyword the mapping has no rule for."""
    gaps = []
    by_name = {token.split(":")[2]: token for token in MAPPINGS}
    for file, text in sources.items():
        for cls_name, keywords in _gcp_calls(ast.parse(text)):
            args_name = cls_name if cls_name.endswith("Args") else f"{cls_name}Args"
            if args_name not in placements():
                gaps.append(f"{file}: gcp {cls_name} has no mapping (a Google Cloud resource type or block of one)"
                            if cls_name not in by_name else f"{file}: {cls_name}: no Args type found")
                continue
            token, prefix = placements()[args_name]
            fields, inputs = MAPPINGS[token].fields, _inputs_of(_args_class(args_name))
            for keyword in keywords:
                if keyword == "opts" or keyword not in inputs:
                    continue
                wire, nested, is_list = inputs[keyword]
                path = f"{prefix}.{wire}" if prefix else wire
                block = path + ("[]" if is_list else "")
                covered = path in fields or (nested and any(p.startswith((f"{block}.", f"{path}.")) for p in fields))
                if not covered:
                    gaps.append(f"{file}: {cls_name}.{keyword} -> {token} {path}")
    return sorted(gaps)


def test_every_keyword_of_every_google_cloud_call_in_components_has_a_rule():
    sources = {p.name: p.read_text() for p in COMPONENTS}
    assert source_gaps(sources) == []


def test_the_source_reading_sees_every_declared_google_cloud_type():
    """Each mapped type is constructed somewhere in components/ (the reading finds the calls)."""
    seen = {cls for p in COMPONENTS for cls, _ in _gcp_calls(ast.parse(p.read_text()))}
    assert {token.split(":")[2] for token in MAPPINGS} <= seen


@pytest.mark.parametrize("added, gap", [
    # A keyword in a branch no stack takes: a pool's max run duration.
    ("gcp.container.NodePoolNodeConfigArgs(machine_type='x', max_run_duration='3600s')",
     "new.py: NodePoolNodeConfigArgs.max_run_duration -> gcp:container/nodePool:NodePool nodeConfig.maxRunDuration"),
    # A resource type no mapping has.
    ("gcp.compute.Address('nat-ip', name='nat-ip')",
     "new.py: gcp Address has no mapping (a Google Cloud resource type or block of one)"),
    # A cluster input through the splatted helper.
    ("class C:\n    def _common(self):\n        return dict(description='x')\n    def make(self):\n"
     "        return gcp.container.Cluster('c', **self._common())",
     "new.py: Cluster.description -> gcp:container/cluster:Cluster description"),
])  # fmt: skip
def test_a_keyword_without_a_rule_is_a_gap(added, gap):
    assert source_gaps({"new.py": f"import pulumi_gcp as gcp\n{added}\n"}) == [gap]
