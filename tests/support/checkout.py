"""A copy of this checkout in a temporary directory, to run its tools and tests as a user's clone would.

    tree = copy_checkout(tmp_path)          # tmp_path/checkout, with tmp_path/shared beside it
    tree = linked_checkout(tmp_path)        # the same, its entries links but the stack files (fast)
    (tree / "Pulumi.mine.yaml").write_text(...)
    run_in(tree, "make", "plan", "STACK=mine")

The copy holds what git would (tracked files and new ones not ignored), never
an environment or a build output; `make` in it uses this session's .venv
(`VENV=`), marked up to date so that nothing is installed. The CRD schemas the
manifest tests read from ../shared/schemas/ (tests/support/schemas.py) are
reached through a link beside the copy, as beside the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def copy_checkout(where: Path) -> Path:
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True, capture_output=True, text=True,
    ).stdout.split("\0")
    tree = where / "checkout"
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():  # a file deleted but not yet staged is still listed
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, tree / name)
    shared = ROOT.parent / "shared"
    if shared.is_dir():
        (where / "shared").symlink_to(shared)
    return tree


def linked_checkout(where: Path) -> Path:
    """A checkout to run the program and the commands in, made in milliseconds: `where`/checkout, whose entries
    are links to this checkout's, but its stack files, which are copies (a test may edit or replace them),
    and its data/, plan/ and inspect/ folders, which it does not have (a test makes its own)."""
    tree = where / "checkout"
    tree.mkdir(parents=True)
    for entry in ROOT.iterdir():
        if entry.name in ("data", "plan", "inspect", ".git") or entry.name.startswith(".pulumi"):
            continue
        if entry.name.startswith("Pulumi.") and entry.name != "Pulumi.yaml":
            shutil.copy2(entry, tree / entry.name)
        else:
            (tree / entry.name).symlink_to(entry)
    shared = ROOT.parent / "shared"
    if shared.is_dir() and not (where / "shared").exists():
        (where / "shared").symlink_to(shared)
    return tree


def make_args(*goals: str) -> list[str]:
    """`make <goals>` against this session's environment, which make must not rebuild."""
    venv = Path(sys.prefix)
    return ["make", "-s", "--no-print-directory", f"VENV={venv}", "-o", f"{venv}/.installed", *goals]


def run_in(tree: Path, *command: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MAKEFLAGS", "MAKELEVEL")}
    return subprocess.run(list(command), cwd=tree, capture_output=True, text=True, timeout=timeout, env=env)
