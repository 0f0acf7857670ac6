"""The plan's accelerator-memory section reads the compiler's table by each run's program key."""

from __future__ import annotations

import json

import pytest

from admission.check import stack_manifests
from core import compiled_hbm
from stack.reader import load_files
from tests.support.pulumi_harness import ROOT
from tools.plan.hbm import hbm_rows, render_hbm


def _entry(key, per_chip_gib):
    return {"key": key, "chips": 16, "hbm_gib": 31.24, "libtpu": "0.0.50.1", "compile_s": 300.0,
            "fingerprint": "f", "bytes": {"per_chip": int(per_chip_gib * 2**30)}}


@pytest.fixture
def table(tmp_path, monkeypatch):
    path = tmp_path / "compiled_hbm.json"
    monkeypatch.setattr(compiled_hbm, "TABLE", path)

    def write(entries):
        path.write_text(json.dumps({"programs": {compiled_hbm.key_name(e["key"]): e for e in entries}}))
    return write


def _rows(stack: str) -> list[dict]:
    config = load_files(stack, ROOT)
    manifests = stack_manifests(config)
    return hbm_rows(config, manifests)


def test_a_compiled_run_shows_the_compiler_s_figure_and_its_spare(table):
    table([])
    (row,) = _rows("tpu-multislice")
    assert row["state"] == "not compiled" and row["key"]["topology"] == "2x4" and row["key"]["slices"] == 2
    table([_entry(row["key"], 29.89)])
    (row,) = _rows("tpu-multislice")
    assert row["state"] == "compiled" and row["fits"] and row["spare_gib"] == pytest.approx(1.35, abs=0.01)
    text = "\n".join(render_hbm([row]))
    assert "29.89 GiB" in text and "v6e 2x4 x2" in text and "DOES NOT FIT" not in text
    table([_entry(row["key"], 30.5)])
    assert "DOES NOT FIT" in "\n".join(render_hbm(_rows("tpu-multislice")))


def test_a_run_whose_program_was_never_compiled_says_which_program(table):
    (row,) = _rows("tpu-multislice")
    table([_entry({**row["key"], "batch_size": row["key"]["batch_size"] * 2}, 20.0)])
    (row,) = _rows("tpu-multislice")
    assert row["state"] == "not compiled"
    (line,) = [l for l in render_hbm([row]) if row["run"] in l]
    assert "no compiler figure for its program (gemma3-270m, full fine-tune, batch 64 x 256 tokens" in line
    assert "on v6e 2x4 x2)" in line


def test_runs_of_other_trainers_have_no_row(table):
    table([])
    assert _rows("a4") == []


@pytest.mark.parametrize("stack", ["dev", "autopilot", "tpu-queued", "tpu-multihost"])
def test_every_shipped_tpu_run_finds_its_program_s_figure_in_the_shipped_table(stack):
    rows = _rows(stack)
    assert rows and all(r["state"] == "compiled" and r["fits"] for r in rows), rows
