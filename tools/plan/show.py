"""What `make plan` shows: the plan's text (resource tree, access, Google API requests, cost, fit,
accelerator memory, model memory, outputs) and the run manifests and Kueue objects it writes."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tools.plan.cost import render_cost, render_fit
from tools.plan.google_api import render_google
from tools.plan.hbm import render_hbm
from tools.plan.memory import render_memory
from tools.plan.tree import render_tree, short
from tools.render import write_manifests as render_files
from tools.yaml_files import only_manifest_left

ENFORCE = "pod-security.kubernetes.io/enforce"


def render(plan: Mapping) -> str:
    n = len(plan["resources"])
    lines = [f"Stack {plan['stack']}: {n} resources `pulumi up` would declare (offline, mocks engine)", ""]
    lines += render_tree(plan)
    if plan.get("access"):
        lines += ["", "Access"] + [f"  {line}" for line in plan["access"]]
    lines += ["", "Google Cloud requests, each judged by Google's definition of its API method"]
    lines += render_google(plan.get("google", []))
    lines += ["", "Accelerators ($/hour at each pool's capacity)"]
    lines += render_cost(plan["cost"])
    lines += render_pod_security(plan.get("pod_security") or {})
    lines += ["", "Fit: each run's pod (FUSE sidecar and memory-backed volumes included) on one node"]
    lines += render_fit(plan.get("fit", []))
    lines += ["", "Accelerator memory: each TPU run's train step on its slice, per chip"]
    lines += render_hbm(plan.get("hbm", []))
    lines += ["", "Model memory: each run's model on its pool's chips (what admission refuses a run on)"]
    lines += render_memory(plan.get("model_memory", []))
    if plan.get("renamed"):
        lines += ["", "Cluster-scoped names: each carries a hash of its namespace and name, so no two stacks' names "
                  "can meet. A stack deployed with the earlier names sees `pulumi preview` replace each of these "
                  "(the new object first, the old one deleted last; a run naming a renamed ComputeClass is "
                  "replaced with it)"]
        lines += [f"  {line}" for line in plan["renamed"]]
    if plan["outputs"]:
        lines += ["", "Stack outputs"]
        for k, v in plan["outputs"].items():
            lines.append(f"  {k}: {short(v) if not isinstance(v, str) else v}")
    return "\n".join(lines)


def render_pod_security(found: Mapping) -> list[str]:
    """The Pod Security level the stack's namespace must allow, and each pod's with what a stricter one refuses."""
    if not found:
        return []
    namespace, level = found["namespace"], found["level"]
    how = ("the stack declares it with that label" if found["declared"] else
           f"its `{ENFORCE}` label must be {level} or less strict, or `pulumi preview` refuses the stack")
    lines = ["", f"Pod Security: namespace {namespace} must allow level {level} ({how})"]
    for row in found["pods"]:
        lines.append(f"  {row['level']:<10}  {row['what']}" + (f": not stricter, for {row['why']}" if row["why"] else ""))
    return lines


def write_manifests(plan: Mapping, out_dir: Path, adopt: bool = False) -> list[Path]:
    """The run manifests in `out_dir`, the Kueue objects in `out_dir`/kueue/ and the model server's in
    `out_dir`/serve/ (each folder removed when it has none): only files the plan wrote there before are
    removed or written over (tools/files.py; `adopt`: the plan's own default folder)."""
    written = render_files(plan["manifests"], out_dir, adopt)
    for sub in ("kueue", "serve"):
        sub_dir = out_dir / sub
        if plan.get(sub) or sub_dir.is_dir():
            written += render_files(plan.get(sub, {}), sub_dir, adopt)
        if not plan.get(sub) and only_manifest_left(sub_dir):
            for leftover in sub_dir.iterdir():
                leftover.unlink()
            sub_dir.rmdir()
    return written


