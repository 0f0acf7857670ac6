"""The offline plan's Google Cloud requests: what each declared resource sends, judged by Google's definitions.

`google_requests(deployment)` builds the request of every Google Cloud
resource the program declared (admission/google_api) and returns one row
per request, or raises the problems Google's discovery documents find, one
line each, so `make plan` refuses the stack as it refuses a bad stack file.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from importlib import metadata
from typing import Any

CLIENT = "google-api-python-client"


class GoogleApiProblems(Exception):
    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


def _leaves(value: Any) -> int:
    if isinstance(value, Mapping):
        return sum(_leaves(v) for v in value.values())
    if isinstance(value, list) and any(isinstance(v, Mapping) for v in value):
        return sum(_leaves(v) for v in value)
    return 1


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def google_requests(deployment) -> list[dict[str, Any]]:
    """One row per Google Cloud resource: its request's API, method and body size; raises on any problem."""
    problems = importlib.import_module("admission.google_api.problems")
    judge = importlib.import_module("admission.google_api.judge")
    request = importlib.import_module("admission.google_api.request")
    discovery = importlib.import_module("admission.google_api.discovery")
    declared = [(r.type, r.name, r.inputs) for r in deployment.resources if judge.is_google_cloud(r.type)]
    found = problems.declared_problems(declared)
    if found:
        raise GoogleApiProblems([str(p) for p in found])
    rows = []
    for type_token, name, inputs in declared:
        mapping = judge.MAPPINGS[type_token]
        built = request.build(mapping, name, inputs)
        rows.append({"resource": name, "type": type_token, "api": discovery.label(mapping.api),
                     "method": mapping.method, "fields": _leaves(built.body) if built.body else 0,
                     "deprecated": [f"{n.key}: {_short(n.value)} {n.reason}" for n in judge.deprecation_notes(built)]})
    return sorted(rows, key=lambda r: (r["api"], r["method"], r["resource"]))


def render_google(rows: list[Mapping[str, Any]]) -> list[str]:
    """One line per API method: its definition's revision, and each resource with its body's field count."""
    if not rows:
        return ["  (no Google Cloud resource declared)"]
    lines = [f"  each passed its method's definition ({CLIENT} {metadata.version(CLIENT)}); "
             "(n): the fields its body sets"]
    by_method: dict[tuple[str, str], list[str]] = {}
    for r in rows:
        by_method.setdefault((r["api"], r["method"]), []).append(f"{r['resource']} ({r['fields']})")
    for (api, method), resources in by_method.items():
        lines.append(f"  {method} [{api}]: {', '.join(resources)}")
    notes = [note for r in rows for note in r.get("deprecated", ())]
    if notes:
        lines.append("  deprecated in Google's definition (accepted; the provider sends them):")
        lines += [f"    {note}" for note in notes]
    return lines
