"""The checkout's environments, cached by content (tools/venvs.py): the key follows the requirement files'
content and nothing else of a checkout, an entry is built once and linked by every checkout, a build that
stopped half-way is never linked, and make asks again only when a requirement file is newer (its own
mtime rule), rebuilding only when the content changed.

The environments built here are real (`python -m venv`, pip) but install nothing from an index: an empty
requirement file, and pip at the version the interpreter bundles (ensurepip), which is already there.
"""

from __future__ import annotations

import ensurepip
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.checkout import ROOT, run_in
from tools import venvs

PIP = ensurepip.version()
BASE = str(Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}")


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("GKE_FINETUNE_VENVS", str(tmp_path / "cache"))
    return tmp_path / "cache"


def checkout(where: Path, **files: str) -> Path:
    where.mkdir(parents=True)
    for name, text in files.items():
        (where / name.replace("__", "/")).parent.mkdir(parents=True, exist_ok=True)
        (where / name.replace("__", "/")).write_text(text)
    return where


def plan(*steps: str, link: str = ".venv", pip: str = PIP) -> venvs.Plan:
    return venvs.Plan(Path(link), BASE, pip, tuple(tuple(step.split()) for step in steps))


def link(root: Path, *steps: str, capsys=None) -> str:
    assert venvs.main(["link", ".venv", "--python", BASE, "--pip", PIP,
                       *[arg for step in steps for arg in ("--install", step)]], root=root) == 0
    return capsys.readouterr().err if capsys else ""


def test_the_key_follows_the_files_content_not_their_mtime_or_checkout(tmp_path, cache):
    a = checkout(tmp_path / "a", **{"req.txt": "six==1.17.0\n-r more.txt\n", "more.txt": "idna==3.10\n"})
    b = checkout(tmp_path / "b", **{"req.txt": "six==1.17.0\n-r more.txt\n", "more.txt": "idna==3.10\n"})
    first = venvs.key(plan("req.txt"), a)
    assert venvs.key(plan("req.txt"), b) == first  # another checkout, same content
    os.utime(a / "req.txt", (time.time() + 60, time.time() + 60))
    assert venvs.key(plan("req.txt"), a) == first  # a fresh checkout's mtimes
    (b / "more.txt").write_text("idna==3.11\n")  # an included file's content
    assert venvs.key(plan("req.txt"), b) != first
    assert venvs.key(plan("req.txt", pip="99.0"), a) != first
    assert venvs.key(plan("req.txt", "more.txt"), a) != venvs.key(plan("req.txt more.txt"), a)  # two pip installs


def test_a_missing_requirement_file_is_one_line_and_exit_78(tmp_path, cache, capsys):
    root = checkout(tmp_path / "a")
    assert venvs.main(["link", ".venv", "--python", BASE, "--pip", PIP, "--install", "nope.txt"], root=root) == 78
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope.txt does not exist" in err and not (root / ".venv").exists()


def test_a_failed_install_exits_1_for_a_retry_and_is_never_linked(tmp_path, cache, capsys):
    # pip refuses a line that is no requirement before it asks an index: a failure a retry may fix (an
    # index that didn't answer fails the same step), so not 78.
    root = checkout(tmp_path / "a", **{"req.txt": "!!! not a requirement\n"})
    assert venvs.main(["link", ".venv", "--python", BASE, "--pip", PIP, "--install", "req.txt"], root=root) == 1
    err = capsys.readouterr().err
    assert "failed (see above)" in err and "rebuilt by the next make" in err, err
    entry = venvs.entry(plan("req.txt"), root)
    assert entry.is_dir() and not venvs.complete(entry) and not (root / ".venv").exists()


def test_an_interpreter_that_hangs_is_one_line_and_exit_78(tmp_path, cache, capsys, monkeypatch):
    root = checkout(tmp_path / "a", **{"req.txt": "# nothing\n"})
    hangs = tmp_path / "python-that-hangs"
    hangs.write_text("#!/bin/sh\nsleep 30\n")
    hangs.chmod(0o755)
    monkeypatch.setattr(venvs, "INTERPRETER_SECONDS", 1)
    assert venvs.main(["link", ".venv", "--python", str(hangs), "--pip", PIP, "--install", "req.txt"], root=root) == 78
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did not say its version within 1s" in err and not (root / ".venv").exists()


def test_two_checkouts_at_once_build_one_entry_and_link_it_both(tmp_path, cache, capsys):
    roots = [checkout(tmp_path / name, **{"req.txt": "# nothing\n"}) for name in ("a", "b")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "tools.venvs", "link", ".venv", "--python", BASE, "--pip", PIP, "--install",
               "req.txt"]
    running = [subprocess.Popen(command, cwd=root, env=env, stderr=subprocess.PIPE, text=True) for root in roots]
    said = [process.communicate(timeout=300)[1] for process in running]
    assert [process.returncode for process in running] == [0, 0], said
    assert sum("built in" in err for err in said) == 1, said  # the other waited on the lock, then linked
    entry = roots[0].joinpath(".venv").resolve()
    assert entry.parent == cache and roots[1].joinpath(".venv").resolve() == entry
    stamp = (entry / ".installed").stat().st_mtime_ns
    assert link(roots[0], "req.txt", capsys=capsys) == ""  # already linked: nothing to do, nothing to say
    assert (entry / ".installed").stat().st_mtime_ns == stamp
    # The scripts' shebangs name the entry's own path, where it stays.
    python = f"python{sys.version_info.major}.{sys.version_info.minor}"
    assert (entry / "bin" / "pip").read_text().splitlines()[0] == f"#!{entry}/bin/{python}"


def test_a_foreign_link_is_kept_an_in_place_environment_replaced_a_half_built_entry_rebuilt(tmp_path, cache, capsys):
    shared = tmp_path / "main" / ".venv"
    (shared / "bin").mkdir(parents=True)
    root = checkout(tmp_path / "a", **{"req.txt": "# nothing\n"})
    (root / ".venv").symlink_to(shared)
    assert "an environment make does not manage: left as it is" in link(root, "req.txt", capsys=capsys)
    assert os.readlink(root / ".venv") == str(shared) and not cache.exists()
    (root / ".venv").unlink()
    (root / ".venv" / "bin").mkdir(parents=True)  # the layout make built before the cache
    entry = venvs.entry(plan("req.txt"), root)
    (entry / "bin").mkdir(parents=True)
    (entry / "bin" / "left-by-a-stopped-build").write_text("")  # no .installed: never linked
    assert "built in" in link(root, "req.txt", capsys=capsys)
    assert (root / ".venv").is_symlink() and (root / ".venv").resolve() == entry
    assert (entry / ".installed").is_file() and not (entry / "bin" / "left-by-a-stopped-build").exists()


def test_make_asks_again_for_a_newer_file_and_rebuilds_only_for_new_content(tmp_path, cache):
    """The real Makefile's rule for .venv-scan, beside what it runs (requirements-scan.txt emptied)."""
    tree = checkout(tmp_path / "checkout", **{"requirements-scan.txt": "# nothing\n", "tools__venvs.py": ""})
    for name in ("Makefile", "tools/__init__.py", "tools/venvs.py"):
        (tree / name).write_text((ROOT / name).read_text())
    make = ["make", "--no-print-directory", ".venv-scan/.installed", f"PY311={BASE}", f"PIP_VERSION={PIP}"]
    first = run_in(tree, *make)
    assert first.returncode == 0 and "built in" in first.stderr, first.stderr
    entry = (tree / ".venv-scan").resolve()
    assert entry.parent == cache
    # A fresh checkout's mtime: make runs the rule, which links the same entry and builds nothing.
    os.utime(tree / "requirements-scan.txt", (time.time() + 60, time.time() + 60))
    again = run_in(tree, *make)
    assert again.returncode == 0 and "built in" not in again.stderr and (tree / ".venv-scan").resolve() == entry
    changed = tree / "requirements-scan.txt"
    changed.write_text("# nothing, but other content\n")
    os.utime(changed, (time.time() + 120, time.time() + 120))
    rebuilt = run_in(tree, *make)
    assert rebuilt.returncode == 0 and "built in" in rebuilt.stderr, rebuilt.stderr
    assert (tree / ".venv-scan").resolve() != entry and (tree / ".venv-scan").resolve().parent == cache
