"""The plan's accelerator-memory section reads the compiler's table, per run."""

from __future__ import annotations

import json

import pytest

from core import compiled_hbm
from tools.plan.hbm import hbm_rows, render_hbm

ARGS = ["--maxlen", "256", "--batch_size", "64"]


def _manifest(args, command=("python", "-m", "trainers.gemma_jax.train")):
    container = {"name": "trainer", "command": list(command), "args": list(args)}
    pod = {"template": {"spec": {"template": {"spec": {"containers": [container]}}}}}
    return {"kind": "JobSet", "spec": {"replicatedJobs": [pod]}}


def _entry(per_chip_gib, args=ARGS):
    return {"topology": "2x4", "slices": 2, "chips": 16, "hbm_gib": 31.24, "libtpu": "0.0.50.1",
            "compile_s": 300.0, "fingerprint": "f", "args": list(args),
            "bytes": {"per_chip": int(per_chip_gib * 2**30)}}


@pytest.fixture
def table(tmp_path, monkeypatch):
    path = tmp_path / "compiled_hbm.json"
    monkeypatch.setattr(compiled_hbm, "TABLE", path)

    def write(runs):
        path.write_text(json.dumps({"runs": runs}))
    return write


def test_a_compiled_run_shows_the_compiler_s_figure_and_its_spare(table):
    table({"s/big": _entry(29.89), "s/tight": _entry(30.5)})
    rows = hbm_rows("s", {"big": _manifest(ARGS), "tight": _manifest(ARGS)})
    assert [(r["run"], r["fits"]) for r in rows] == [("big", True), ("tight", False)]
    assert rows[0]["spare_gib"] == pytest.approx(1.35, abs=0.01)
    text = "\n".join(render_hbm(rows))
    assert "29.89 GiB" in text and "v6e 2x4 x2" in text
    assert text.count("DOES NOT FIT") == 1


def test_a_run_whose_flags_changed_or_that_was_never_compiled_says_so(table):
    table({"s/old": _entry(20.0, args=["--batch_size", "32"])})
    rows = hbm_rows("s", {"old": _manifest(ARGS), "new": _manifest(ARGS)})
    assert {r["run"]: r["state"] for r in rows} == {"old": "compiled for other flags", "new": "not compiled"}
    assert render_hbm(rows).count("  new                      not compiled: run `make tpu-compile`") == 1


def test_runs_of_other_trainers_have_no_row(table):
    table({})
    assert hbm_rows("s", {"gpu": _manifest(ARGS, command=("accelerate", "launch", "-m", "trainers.trl_gpu.train"))}) == []


def test_the_shipped_table_covers_the_dev_stack_s_run():
    found = compiled_hbm.lookup("dev", "gemma3-single-host", compiled_hbm.read()["dev/gemma3-single-host"]["args"])
    assert found is not None and found.current and found.per_chip_gib > 0
