"""The offline plan diff: what a change adds, removes and modifies, input by input, and its cost."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tools.plan.tree import flatten, short


def _key(r: Mapping) -> str:
    return f"{r['type']}::{r['name']}"


# Properties the Kubernetes provider itself replaces a resource for, whatever the program says
# (pulumi-kubernetes provider/pkg/provider/diff.go, forceNewProperties and its table, v4.25.0):
# every object's name and namespace, and per kind the fields the API server won't update.
PROVIDER_REPLACES = {
    "kubernetes:batch/v1:Job": ("spec.completions", "spec.parallelism", "spec.selector", "spec.template"),
    "kubernetes:core/v1:Secret": ("type", "stringData", "data"),
    "kubernetes:core/v1:ConfigMap": ("data", "binaryData"),
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": ("roleRef",),
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding": ("roleRef",),
}
KUBERNETES_OBJECT_REPLACES = ("metadata.name", "metadata.namespace")


def replace_paths(resource: Mapping) -> tuple[str, ...]:
    """The input paths whose change replaces `resource`: its `replaceOnChanges`, and what its
    provider replaces for (Kubernetes objects; not a Helm release or a provider)."""
    own = tuple(resource.get("replaceOnChanges") or ())
    kind = resource["type"]
    if not kind.startswith("kubernetes:") or kind.startswith("kubernetes:helm.sh/") or kind.startswith("pulumi:"):
        return own
    return own + KUBERNETES_OBJECT_REPLACES + PROVIDER_REPLACES.get(kind, ())


def _replaced_by(paths, replace_on_changes) -> list[str]:
    """The changed input paths a `replaceOnChanges` entry covers (the engine then replaces the
    resource instead of updating it): an entry names a property path, `a.b`, covering `a.b`,
    `a.b.c` and `a.b[0]...` alike."""
    return [p for p in paths for entry in replace_on_changes
            if p == f"inputs.{entry}" or p.startswith((f"inputs.{entry}.", f"inputs.{entry}["))]


def diff(base: Mapping | None, head: Mapping | None) -> dict[str, Any]:
    """Resources added, removed, modified (with each changed input) and, among the modified, those
    a change replaces (their `replaceOnChanges`), from base to head."""
    before = {_key(r): r for r in (base or {}).get("resources", [])}
    after = {_key(r): r for r in (head or {}).get("resources", [])}
    modified, replaced = {}, []
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
            if _replaced_by(changes, replace_paths(after[key])):
                replaced.append(key)
    cost_before = (base or {}).get("cost", {}).get("total_usd_per_hour", 0.0)
    cost_after = (head or {}).get("cost", {}).get("total_usd_per_hour", 0.0)
    return {
        "added": sorted(after.keys() - before.keys()),
        "removed": sorted(before.keys() - after.keys()),
        "modified": modified,
        "replaced": replaced,
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
        replace = key in changes.get("replaced", ())
        lines.append(f"+- {key} (replaced: a property it can't update in place changes)" if replace else f"~ {key}")
        for path, (old, new) in inputs.items():
            lines.append(f"    {path}: {short(old) if old is not None else '(none)'} → {short(new) if new is not None else '(none)'}")
    before, after = changes["cost"]
    lines += ["", f"Accelerators at full size: ${before:.2f}/hour → ${after:.2f}/hour (each at the top of its capacity's price range)"]
    return "\n".join(lines)
