"""The offline plan diff: what a change adds, removes and modifies, input by input, and its cost."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tools.plan_tree import flatten, short


def _key(r: Mapping) -> str:
    return f"{r['type']}::{r['name']}"


def diff(base: Mapping | None, head: Mapping | None) -> dict[str, Any]:
    """Resources added, removed and modified (with each changed input) from base to head."""
    before = {_key(r): r for r in (base or {}).get("resources", [])}
    after = {_key(r): r for r in (head or {}).get("resources", [])}
    modified = {}
    for key in sorted(before.keys() & after.keys()):
        b = flatten({"inputs": before[key]["inputs"], "protect": before[key]["protect"]})
        a = flatten({"inputs": after[key]["inputs"], "protect": after[key]["protect"]})
        changes = {
            path: (b.get(path), a.get(path))
            for path in sorted(b.keys() | a.keys())
            if b.get(path) != a.get(path)
        }
        if changes:
            modified[key] = changes
    cost_before = (base or {}).get("cost", {}).get("total_usd_per_hour", 0.0)
    cost_after = (head or {}).get("cost", {}).get("total_usd_per_hour", 0.0)
    return {
        "added": sorted(after.keys() - before.keys()),
        "removed": sorted(before.keys() - after.keys()),
        "modified": modified,
        "cost": (cost_before, cost_after),
    }


def render_diff(changes: Mapping, stack: str, base_ref: str) -> str:
    lines = [f"Offline plan diff of stack {stack}: {base_ref} → working tree", ""]
    if not (changes["added"] or changes["removed"] or changes["modified"]):
        lines.append("No changes.")
    for key in changes["added"]:
        lines.append(f"+ {key}")
    for key in changes["removed"]:
        lines.append(f"- {key}")
    for key, inputs in changes["modified"].items():
        lines.append(f"~ {key}")
        for path, (old, new) in inputs.items():
            lines.append(f"    {path}: {short(old) if old is not None else '(none)'} → {short(new) if new is not None else '(none)'}")
    before, after = changes["cost"]
    lines += ["", f"Accelerators at full size: ${before:.2f}/hour → ${after:.2f}/hour (each at the top of its capacity's price range)"]
    return "\n".join(lines)
