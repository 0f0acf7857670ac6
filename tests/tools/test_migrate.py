"""`make migrate`: what is copied where, how a copy is verified, the progress bar, the command's refusals. The
copies themselves run against a real Cloud Storage API server in e2e/tests/test_bucket_reads.py."""

from __future__ import annotations

import io
import subprocess
import sys
from types import SimpleNamespace

from stack.reader import load_files
from tests.support.pulumi_harness import ROOT
from tools.migrate.bar import Bar, line
from tools.migrate import copy
from tools.migrate.__main__ import main as migrate_main
from tools.migrate.copy import same
from tools.migrate.plan import Move, moves


def test_each_old_prefix_goes_to_the_one_that_carries_the_stack():
    config = load_files("dev", ROOT)
    assert moves(config) == [
        Move("run gemma3-single-host checkpoints", "checkpoints/gemma3-single-host", "checkpoints/dev/gemma3-single-host"),
        Move("run gemma3-single-host profiles", "profiles/gemma3-single-host", "profiles/dev/gemma3-single-host"),
        Move("dataset tinystories", "datasets/tinystories", "datasets/dev/tinystories"),
    ]
    assert [m.what for m in moves(config, "gemma3-single-host")] == [
        "run gemma3-single-host checkpoints", "run gemma3-single-host profiles"]  # one run: no dataset


def blob(crc: str, md5: str | None = "m", size: int = 3) -> SimpleNamespace:
    return SimpleNamespace(crc32c=crc, md5_hash=md5, size=size)


def test_a_copy_is_verified_by_crc32c_and_by_md5_where_both_have_one():
    assert same(blob("c"), blob("c"))
    assert not same(blob("c"), blob("d"))
    assert not same(blob("c"), blob("c", size=4))
    assert not same(blob("c", "m"), blob("c", "n"))
    assert same(blob("c", None), blob("c", "n"))  # a composite source has no MD5: CRC32C alone
    assert not same(blob("c"), None)


def test_the_bar_counts_bytes_and_objects_and_writes_a_line_per_tenth_to_a_log():
    assert line(0, 2**30, 0, 4) == "[..............................]   0.0%  0.0 KiB of 1.00 GiB, 0 of 4 objects"
    out = io.StringIO()
    bar = Bar(100, 4, out)
    for _ in range(4):
        bar.advance(25, 1)
    bar.close()
    lines = out.getvalue().splitlines()
    assert lines[-1].endswith("100.0%  0.1 KiB of 0.1 KiB, 4 of 4 objects")
    assert len(lines) == 4  # 2, 5, 7 tenths, then done


def _migrate(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools.migrate", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def test_an_unknown_run_or_stack_is_refused_with_exit_78_and_no_traceback():
    done = _migrate("--stack", "dev", "--run", "nope")
    assert done.returncode == 78 and done.stderr == ("migrate: 'nope' is not a run of stack dev; runs: "
                                                     "gemma3-single-host\n")
    done = _migrate("--stack", "no-such-stack")
    assert done.returncode == 78 and "Traceback" not in done.stderr and done.stderr.startswith("migrate: stack")


def test_a_bucket_that_cannot_be_reached_is_one_line_and_exit_1(monkeypatch, capsys):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setattr(copy, "RETRY", copy.RETRY.with_timeout(1))
    assert migrate_main(["--stack", "dev"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("migrate: gs://my-project-id-dev-finetune cannot be read: ") and "Traceback" not in err
