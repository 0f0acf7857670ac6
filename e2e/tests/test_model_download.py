"""`make download` against a Cloud Storage API server on 127.0.0.1 (fake-gcs-server) with the real
google-cloud-storage client: an export refused until its marker is there, then downloaded with every
checksum checked, resumed from a partial file, a corrupted file caught, and a directory holding
something else left alone without --force. No control plane: only the emulator."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from e2e.harness import fake_gcs
from e2e.harness.processes import Supervisor
from e2e.harness.tools import ROOT, tools
from trainers import export_dir

STACK = "a4"
RUN = "gemma4-sql"
PREFIX = f"exports/{STACK}/{RUN}"
FILES = {"config.json": b'{"model_type": "gemma4_text"}', "model.safetensors": os.urandom(3 * 1024 * 1024 + 17),
         "tokenizer_config.json": b"{}", "chat_template.jinja": b"{{ messages }}"}


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
    supervisor = Supervisor(tmp_path_factory.mktemp("fake-gcs"))
    try:
        server = fake_gcs.start(supervisor, tools(("fake-gcs",)))
        yield server
    finally:
        supervisor.stop()


@pytest.fixture(scope="module")
def root(tmp_path_factory, gcs):
    """A checkout's stack files (the shipped a4 stack, its run with `export:`), its bucket in the emulator."""
    root = tmp_path_factory.mktemp("checkout")
    shutil.copy(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    shutil.copy(ROOT / f"Pulumi.{STACK}.yaml", root / f"Pulumi.{STACK}.yaml")
    config = yaml.safe_load((root / f"Pulumi.{STACK}.yaml").read_text())["config"]
    gcs.create_bucket(f"{config['gcp:project']}-{STACK}-finetune")
    return root


def _bucket(root: Path) -> str:
    return f"{yaml.safe_load((root / f'Pulumi.{STACK}.yaml').read_text())['config']['gcp:project']}-{STACK}-finetune"


def _download(root: Path, gcs, target: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **gcs.env, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "tools.model", "download", "--stack", STACK, "--run", RUN,
                           "--dir", str(target), "--root", str(root), "--quiet", *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def _marker(tmp: Path) -> bytes:
    for name, data in FILES.items():
        (tmp / name).write_bytes(data)
    export_dir.finish(str(tmp), {"trainer": "trl-gpu", "run": RUN, "step": 4, "merge": True})
    return (tmp / export_dir.MARKER).read_bytes()


def test_an_export_without_its_marker_is_refused_before_anything_is_downloaded(root, gcs, tmp_path):
    bucket = _bucket(root)
    for name, data in FILES.items():
        gcs.upload(bucket, f"{PREFIX}/{name}", data)
    done = _download(root, gcs, tmp_path / "model")
    assert done.returncode == 66, done.stderr
    assert "no export_complete.json" in done.stderr and "not complete" in done.stderr
    assert not (tmp_path / "model").exists()


def test_the_export_is_downloaded_checked_resumed_and_never_overwritten(root, gcs, tmp_path):
    bucket = _bucket(root)
    gcs.upload(bucket, f"{PREFIX}/{export_dir.MARKER}", _marker(tmp_path))
    target = tmp_path / "model"
    done = _download(root, gcs, target)
    assert done.returncode == 0, done.stderr
    assert "5 files downloaded, 0 already there" in done.stdout
    assert export_dir.read(str(target))["step"] == 4
    assert (target / "model.safetensors").read_bytes() == FILES["model.safetensors"]

    # Interrupted: a third of the weights in their .part file, the file itself gone; the rest is fetched.
    (target / "model.safetensors").unlink()
    (target / "model.safetensors.part").write_bytes(FILES["model.safetensors"][: 1024 * 1024])
    again = _download(root, gcs, target)
    assert again.returncode == 0, again.stderr
    assert "1 files downloaded, 4 already there" in again.stdout
    assert (target / "model.safetensors").read_bytes() == FILES["model.safetensors"]
    assert not (target / "model.safetensors.part").exists()

    # A .part that is not the object's first bytes: the checksum catches it, and the file is not kept.
    (target / "model.safetensors").unlink()
    (target / "model.safetensors.part").write_bytes(b"x" * 1024)
    bad = _download(root, gcs, target)
    assert bad.returncode == 73, bad.stderr
    assert "checksum" in bad.stderr and not (target / "model.safetensors").exists()


def test_a_directory_holding_something_else_is_left_alone_without_force(root, gcs, tmp_path):
    gcs.upload(_bucket(root), f"{PREFIX}/{export_dir.MARKER}", _marker(tmp_path))
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    refused = _download(root, gcs, target)
    assert refused.returncode == 78, refused.stderr
    assert "notes.txt" in refused.stderr and "--force" in refused.stderr
    assert sorted(p.name for p in target.iterdir()) == ["notes.txt"]
    forced = _download(root, gcs, target, "--force")
    assert forced.returncode == 0, forced.stderr
    assert (target / "notes.txt").read_text() == "mine" and export_dir.read(str(target))["run"] == RUN


def test_a_run_without_export_is_named_with_what_to_do(root, gcs, tmp_path):
    env = {**os.environ, **gcs.env, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "tools.model", "download", "--stack", "dev", "--run", "nope",
                           "--root", str(ROOT), "--dir", str(tmp_path / "x")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 66 and "'nope' is not one of stack dev's runs with `export:`" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
