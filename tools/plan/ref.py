"""Planning another git ref (`make plan-diff BASE=<ref>`): the ref checked out into a temporary
worktree and planned there by its own plan tool, in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tools.plan.collect import ROOT, PlanError


def plan_json(stack: str, root: Path, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    """Plan another tree with that tree's own plan tool, in a fresh interpreter.

    Each tree plans itself with its own code (its modules must not mix with
    this tree's, and an older tree may be laid out differently); the plan's
    JSON is the interface between the two.
    """
    # `python -m tools.plan` from the tree's own directory runs its own tool, whichever layout it has:
    # this package's __main__.py, or the single module tools/plan.py of a tree from before the package.
    if not ((root / "tools" / "plan" / "__main__.py").is_file() or (root / "tools" / "plan.py").is_file()):
        raise PlanError([f"{root} has no tools/plan/ (or tools/plan.py) to plan it with"])
    command = [sys.executable, "-m", "tools.plan", "json", "--stack", stack, "--root", str(root)]
    flags = [word for key in secrets for word in ("--secret", key)]
    proc = subprocess.run(command + flags, capture_output=True, text=True, cwd=str(root))  # as the CLI
    if flags and proc.returncode == 2 and "unrecognized arguments: --secret" in proc.stderr:
        # A tree whose plan tool predates --secret gave every stack its secrets itself.
        proc = subprocess.run(command, capture_output=True, text=True, cwd=str(root))
    if proc.returncode != 0:
        raise PlanError([f"planning {root} failed:", proc.stderr.strip()[-2000:]])
    return json.loads(proc.stdout)


def plan_ref(stack: str, ref: str, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    """Plan `stack` as it is at git `ref`, from a temporary worktree."""
    with tempfile.TemporaryDirectory(prefix="plan-base-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(tree), ref],
                       check=True, capture_output=True, text=True)
        try:
            return plan_json(stack, tree, secrets)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                           capture_output=True, text=True)


