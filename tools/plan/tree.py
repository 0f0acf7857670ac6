"""The offline plan's resource tree: every declared resource under its parent, with a few key inputs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

# Leaf inputs worth a glance in the tree; every input is compared by `diff`.
KEY_INPUTS = (
    "name", "accountId", "repositoryId", "location", "nodeLocations", "machineType", "nodeCount",
    "minNodeCount", "maxNodeCount", "totalMinNodeCount", "totalMaxNodeCount", "tpuTopology",
    "spot", "flexStart", "consumeReservationType", "values", "role", "member", "chart", "version",
    "kind", "namespace", "tags", "push", "uniformBucketLevelAccess", "publicAccessPrevention",
    "enabled", "channel", "deletionProtection", "format", "image", "replicas", "parallelism",
    "ipCidrRange", "natIpAllocateOption", "privateIpGoogleAccess", "enablePrivateNodes", "diskSizeGb",
    "service", "disableOnDestroy",
)


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Leaf values by path (`a.b[0].c`); lists of scalars stay whole."""
    out: dict[str, Any] = {}
    if isinstance(value, Mapping) and value:
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list) and any(isinstance(v, (Mapping, list)) for v in value):
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    text = text.splitlines()[0] + (" …" if "\n" in text else "") if text else text
    return text if len(text) <= 60 else text[:57] + "…"


def key_inputs(inputs: Mapping) -> str:
    """A few telling inputs of a resource, `path=value`, in KEY_INPUTS order."""
    found = []
    for path, value in flatten(inputs).items():
        leaf = path.rsplit(".", 1)[-1]
        if leaf not in KEY_INPUTS or value in (None, "", [], {}):
            continue
        if path.startswith("spec.") and leaf not in ("image", "replicas", "parallelism"):
            continue  # a manifest's own fields: the rendered YAML shows them all
        found.append((KEY_INPUTS.index(leaf), path, value))
    return " ".join(f"{path}={short(value)}" for _, path, value in sorted(found)[:8])


def render_tree(plan: Mapping) -> list[str]:
    resources = plan["resources"]
    children: dict[str, list[dict]] = {}
    # Sorted, not in registration order: the engine registers concurrently.
    for r in sorted(resources, key=lambda r: (r["type"], r["name"])):
        children.setdefault(r["parent"], []).append(r)
    lines: list[str] = []

    def walk(parent: str, indent: str) -> None:
        items = children.get(parent, [])
        for i, r in enumerate(items):
            last = i == len(items) - 1
            branch = "└─ " if last else "├─ "
            flags = "".join(
                f" [{f}]" for f, on in (("protect", r["protect"]), ("retain", r["retainOnDelete"])) if on
            )
            details = key_inputs(r["inputs"])
            lines.append(f"{indent}{branch}{r['type']}  {r['name']}{flags}")
            if details:
                lines.append(f"{indent}{'   ' if last else '│  '}   {details}")
            walk(r["urn"], indent + ("   " if last else "│  "))

    walk("", "")
    return lines
