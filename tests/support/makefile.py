"""The Makefile's targets as GNU make itself reads them, and the targets `make help` lists.

GNU make's database (`make -p`, with `-q` so that no recipe runs and `-rR` so that its built-in
rules stay out) lists every file it knows in its "# Files" section; a name that only appears as a
prerequisite is marked "# Not a target:" (GNU make manual, "Summary of Options", `--print-data-base`).
A target a user may call is one whose name is neither a file path (an environment's `.installed`
marker) nor private by its leading `_` or `.` (`_stack`, `.PHONY`, `.pulumi-state`).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

_RULE = re.compile(r"^([^#\s][^:=]*?):(?![=:])")
_HELP_LINE = re.compile(r"^\s*make ([a-z0-9][a-z0-9-]*)\b")


def _make(directory: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    return subprocess.run(["make", "--no-print-directory", *args], cwd=directory, capture_output=True, text=True,
                          timeout=60, env=env)


def targets(directory: Path) -> set[str]:
    """Every target of `directory`/Makefile, as make's database has them."""
    database = _make(directory, "-pqrR").stdout  # -q exits 1 when the default goal is out of date: not an error
    found, in_files, not_a_target = set(), False, False
    for line in database.splitlines():
        if line == "# Files":
            in_files = True
        elif line.startswith("# files hash-table stats"):
            in_files = False
        elif in_files and line.startswith("# Not a target:"):
            not_a_target = True
        elif in_files and (match := _RULE.match(line)):
            if not not_a_target:
                found.add(match.group(1).strip())
            not_a_target = False
    if not found:
        raise AssertionError(f"no targets in make's database of {directory}/Makefile")
    return found


def user_targets(directory: Path) -> set[str]:
    """The targets a user may call: no file path, nothing private (`_name`, `.name`)."""
    return {t for t in targets(directory) if "/" not in t and not t.startswith(("_", "."))}


def help_targets(directory: Path) -> set[str]:
    """The targets `make help` names, each as the first word after `make` on a line."""
    shown = _make(directory, "-s", "help")
    assert shown.returncode == 0, shown.stderr
    return {m.group(1) for line in shown.stdout.splitlines() if (m := _HELP_LINE.match(line))}


def help_mismatch(directory: Path) -> tuple[set[str], set[str]]:
    """(targets a user may call that `make help` leaves out, names `make help` shows that are no such target)."""
    callable_, listed = user_targets(directory), help_targets(directory)
    return callable_ - listed, listed - callable_
