"""What the mapping covers of what the program declares: the test that nothing slips past, and the doc's table.

`gaps(resources)` lists each Google Cloud resource type with no mapping and
each input the program sets that no rule covers; `table(resources)` is the
coverage table of README.md: per resource type, the inputs the program sets,
and the inputs it leaves unset that are judged with the default pulumi-gcp
documents for them (defaults.py), with the API fields (or URL parameters) they
are checked as; `unjudged(resources)` the documented defaults no request carries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from admission.google_api.judge import MAPPINGS, is_google_cloud
from admission.google_api.request import build


def gaps(resources: Iterable[tuple[str, str, Mapping[str, Any]]]) -> list[str]:
    """`type: unmapped` and `type input.path: uncovered`, one line each (empty when all is covered)."""
    found: set[str] = set()
    for type_token, name, inputs in resources:
        if not is_google_cloud(type_token):
            continue
        mapping = MAPPINGS.get(type_token)
        if mapping is None:
            found.add(f"{type_token}: no mapping to Google's API")
            continue
        found |= {f"{type_token} {path}: no rule" for path, _ in build(mapping, name, inputs).uncovered}
    return sorted(found)


def table(resources: Iterable[tuple[str, str, Mapping[str, Any]]]) -> dict[str, dict[str, str]]:
    """Resource type -> {input pattern the program sets: what it is checked as}."""
    rows: dict[str, dict[str, str]] = {}
    for type_token, name, inputs in resources:
        mapping = MAPPINGS.get(type_token)
        if mapping is not None:
            built = build(mapping, name, inputs)
            row = rows.setdefault(type_token, {})
            row.update(built.used)
            row.update({f"{path}{DEFAULT_MARK}": dest for path, dest in built.defaults.items() if path not in row})
    for row in rows.values():  # an input one stack sets and another leaves to its default: set
        for key in [k for k in row if k.endswith(DEFAULT_MARK) and k.removesuffix(DEFAULT_MARK) in row]:
            del row[key]
    return {t: dict(sorted(used.items())) for t, used in sorted(rows.items())}


DEFAULT_MARK = " (unset: its documented default)"


def unjudged(resources: Iterable[tuple[str, str, Mapping[str, Any]]]) -> dict[str, dict[str, str]]:
    """Resource type -> {documented default no request carries: why}."""
    rows: dict[str, dict[str, str]] = {}
    for type_token, name, inputs in resources:
        mapping = MAPPINGS.get(type_token)
        if mapping is not None:
            rows.setdefault(type_token, {}).update(build(mapping, name, inputs).unjudged)
    return {t: dict(sorted(r.items())) for t, r in sorted(rows.items()) if r}


def markdown(rows: Mapping[str, Mapping[str, str]]) -> str:
    """The table as README.md shows it: one row per resource type."""
    lines = ["| resource type | API method (definition) | input the program sets, or its documented default → checked as |",
             "|---|---|---|"]
    for type_token, used in rows.items():
        mapping = MAPPINGS[type_token]
        cells = "<br>".join(f"`{src}` → `{dst}`" for src, dst in used.items())
        lines.append(f"| `{type_token}` | `{mapping.method}` ({mapping.api}) | {cells} |")
    return "\n".join(lines)
