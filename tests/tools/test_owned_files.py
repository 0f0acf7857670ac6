"""Commands write only what they own: `make plan`'s `--out` and `make handoff`'s `--out` remove only the files
they wrote there before (their manifest, tools/files.py) and never write over another file; the user's
other files stay as they were."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tools.files import MANIFEST, OwnedFiles, WriteRefused
from tools.plan.show import write_manifests

ROOT = Path(__file__).resolve().parents[2]


def _plan(*runs: str, kueue: tuple[str, ...] = ()) -> dict:
    manifest = lambda name: {"apiVersion": "v1", "kind": "X", "metadata": {"name": name}}  # noqa: E731
    return {"manifests": {r: manifest(r) for r in runs}, "kueue": {k: manifest(k) for k in kueue}}


def test_the_plan_removes_only_what_it_wrote_before(tmp_path):
    (tmp_path / "mine.yaml").write_text("my own notes\n")
    (tmp_path / "notes.txt").write_text("kept\n")
    write_manifests(_plan("a", "b", kueue=("q",)), tmp_path)
    assert json.loads((tmp_path / MANIFEST).read_text()) == {"files": ["a.yaml", "b.yaml"]}
    write_manifests(_plan("a"), tmp_path)  # b is gone from the stack, and the Kueue objects
    assert sorted(p.name for p in tmp_path.iterdir()) == [MANIFEST, "a.yaml", "mine.yaml", "notes.txt"]
    assert (tmp_path / "mine.yaml").read_text() == "my own notes\n"


def test_a_file_of_the_same_name_that_is_not_the_plans_is_never_written_over(tmp_path):
    (tmp_path / "b.yaml").write_text("mine\n")
    with pytest.raises(WriteRefused, match=r"b.yaml exists and was not written by this command; nothing was written"):
        write_manifests(_plan("a", "b"), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.yaml"] and (tmp_path / "b.yaml").read_text() == "mine\n"


def test_the_plans_own_folder_adopts_what_an_earlier_plan_wrote_there(tmp_path):
    (tmp_path / "old-run.yaml").write_text("written by a plan before the manifest existed\n")
    write_manifests(_plan("a"), tmp_path, adopt=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [MANIFEST, "a.yaml"]


def test_an_out_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(WriteRefused, match="is a file, not a folder"):
        OwnedFiles(tmp_path / "file").write({"a.yaml": "x"})


def test_make_plan_with_out_keeps_the_folders_other_files(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "other.yaml").write_text("the user's\n")
    (out / "gemma3-single-host.yaml").write_text("the user's too\n")
    command = [sys.executable, "-m", "tools.plan", "show", "--stack", "dev", "--out", str(out)]
    refused = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 73, refused.stderr
    assert "gemma3-single-host.yaml exists and was not written by this command" in refused.stderr
    assert (out / "gemma3-single-host.yaml").read_text() == "the user's too\n"
    (out / "gemma3-single-host.yaml").unlink()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "gemma3-single-host.yaml", "other.yaml"]
    assert (out / "other.yaml").read_text() == "the user's\n"


def test_handoff_out_writes_only_its_two_files(tmp_path):
    from tools.plan.handoff import PLACEHOLDER, handoff, write  # noqa: PLC0415

    (tmp_path / "rbac.yaml").write_text("someone else's\n")
    found = handoff("existing-dev", ROOT, PLACEHOLDER)
    with pytest.raises(WriteRefused):
        write(found, tmp_path)
    assert (tmp_path / "rbac.yaml").read_text() == "someone else's\n" and not (tmp_path / "gcloud.sh").exists()
    (tmp_path / "rbac.yaml").unlink()
    (tmp_path / "keep.txt").write_text("x")
    assert {p.name for p in write(found, tmp_path)} == {"rbac.yaml", "gcloud.sh"}
    write(found, tmp_path)  # again: its own files, written over
    assert sorted(p.name for p in tmp_path.iterdir()) == [MANIFEST, "gcloud.sh", "keep.txt", "rbac.yaml"]
