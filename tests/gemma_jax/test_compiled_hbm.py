"""Every shipped TPU run against the real TPU compiler (libtpu, ahead of time, on CPU).

core/compiled_hbm.json holds, per program (what a train step is built
from and the slice it runs on: trainers/gemma_jax/memory.py program_key),
what the compiler assigns per chip (`make tpu-compile`,
tests/gemma_jax/tpu_table.py); every shipped run finds its program's figure
whatever its stack or run is called. Compiling a 270M step for a v6e takes tens
of minutes on a laptop's CPU, so these tests lower every run (seconds) and
check that the table was compiled from exactly that program: a change of
flags, model, optimizer, sharding or the compiler's version fails here
until the table is rewritten, and a run that leaves less than the stated
margin free fails here too. The compiler itself runs in the tests on a
tiny model: a multislice step whose figures add up, and a batch it refuses.
"""

from __future__ import annotations

import importlib.metadata
import math
import json
import pathlib
import subprocess
import sys

import pytest

from gemma_jax_helpers import REPO, cpu_env
import tpu_table
from core import compiled_hbm
from trainers.gemma_jax import memory

RUNS = {r["run"]: r for r in tpu_table.shipped_runs()}
PROGRAMS = tpu_table.programs(list(RUNS.values()))
TABLE = compiled_hbm.read()
REQUIREMENTS_TPU = pathlib.Path(REPO) / "trainers" / "gemma_jax" / "requirements-tpu.txt"


@pytest.fixture(scope="module")
def fingerprints() -> dict[str, dict[str, str]]:
    return tpu_table.current_fingerprints()


def test_the_shipped_tpu_runs_cover_one_host_several_hosts_and_several_slices():
    shapes = {(r["topology"], r["slices"]) for r in RUNS.values()}
    assert {("1x1", 1), ("2x4", 1), ("2x4", 2)} <= shapes, shapes


def test_the_table_holds_every_shipped_program_and_nothing_else():
    assert set(TABLE) == set(PROGRAMS), "run `make tpu-compile`"
    assert len(PROGRAMS) < len(RUNS), "runs of one program share one entry"


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_table_was_compiled_from_the_program_its_key_names(name, fingerprints):
    entry, key = TABLE.get(name), PROGRAMS[name]
    assert entry is not None, f"{name}: not compiled; run `make tpu-compile`"
    assert entry["key"] == key and compiled_hbm.key_name(entry["key"]) == name
    assert entry["chips"] == math.prod(int(d) for d in key["topology"].split("x")) * key["slices"]
    assert entry["fingerprint"] == fingerprints["programs"][name], (
        f"{name}: the train step changed since it was compiled; run `make tpu-compile`")


@pytest.mark.parametrize("run", sorted(RUNS))
def test_each_run_finds_its_program_s_figure_and_leaves_the_margin_free(run, fingerprints):
    r = RUNS[run]
    found = compiled_hbm.lookup(r["key"])
    assert found is not None, f"{run}: no figure for {compiled_hbm.describe(r['key'])}"
    assert (found.topology, found.slices) == (r["topology"], r["slices"])
    # The run's own flags (data, checkpoints, profiling, export...) lower to the very program the figure was
    # compiled from: the key holds everything that decides it.
    assert fingerprints["runs"][run] == TABLE[compiled_hbm.key_name(r["key"])]["fingerprint"]
    assert found.per_chip_gib is not None, f"{run}: {TABLE[compiled_hbm.key_name(r['key'])].get('error')}"
    assert found.fits, (
        f"{run}: {found.per_chip_gib:.2f} GiB of {found.hbm_gib} GiB per chip leaves "
        f"{found.spare_gib:.2f} GiB; at least {compiled_hbm.MARGIN_GIB} GiB must stay free")


def test_a_copied_stack_or_renamed_run_keeps_its_figure_and_another_program_has_none():
    r = next(r for r in RUNS.values() if r["topology"] == "1x1")
    copied = memory.program_key(["--log_every", "7", "--learning_rate", "1e-5", *r["args"]], "1x1", 1)
    assert compiled_hbm.lookup(copied) == compiled_hbm.lookup(r["key"]) is not None
    assert compiled_hbm.lookup({**r["key"], "batch_size": r["key"]["batch_size"] * 2}) is None
    assert compiled_hbm.lookup({**r["key"], "lora_rank": 8}) is None
    assert compiled_hbm.lookup({**r["key"], "topology": "2x2"}) is None


def test_the_compiler_the_table_names_is_the_one_installed_and_the_image_pins():
    pins = [line.split("#")[0].strip() for line in REQUIREMENTS_TPU.read_text().splitlines()]
    (pinned,) = [p.split("==")[1] for p in pins if p.startswith("libtpu==")]
    installed = importlib.metadata.version("libtpu")
    assert installed == pinned
    assert {e["libtpu"] for e in TABLE.values()} == {pinned}
    assert {e["hbm_gib"] for e in TABLE.values()} == {memory.HBM_GIB}
    assert memory.MARGIN_GIB == compiled_hbm.MARGIN_GIB


def test_the_readme_shows_the_compiler_s_figure_for_every_shipped_run():
    readme = (pathlib.Path(REPO) / "trainers" / "gemma_jax" / "README.md").read_text()
    missing = [row for row in tpu_table.markdown_rows({"programs": TABLE}, list(RUNS.values())) if row not in readme]
    assert not missing, "README out of date (make tpu-compile prints the rows):\n" + "\n".join(missing)


def _tiny(tmp_path, tokenizer_file, *flags) -> list[str]:
    return ["--model", "tiny", "--tokenizer", tokenizer_file, "--data_path", str(tmp_path),
            "--checkpoint_dir", str(tmp_path), *flags]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory, tokenizer_file) -> dict[str, dict]:
    """The compiler's reports on a tiny model, both compiled by one process: a multislice step, and a
    batch whose [B, L, L] attention mask alone is 64 GiB (batch 1024, maxlen 8192)."""
    d = tmp_path_factory.mktemp("aot")
    multislice, too_big = tpu_table.aot_reports([
        ("2x4", 2, _tiny(d, tokenizer_file, "--batch_size", "32", "--maxlen", "64")),
        ("1x1", 1, _tiny(d, tokenizer_file, "--batch_size", "1024", "--maxlen", "8192")),
    ])
    return {"multislice": multislice, "too_big": too_big}


def test_the_compiler_places_a_multislice_step_and_its_figures_add_up(compiled):
    report = compiled["multislice"]
    b = report["bytes"]
    assert report["chips"] == 16 and report["fits"]
    assert b["per_chip"] == b["argument"] + b["output"] - b["alias"] + b["temp"] + b["generated_code"]
    assert b["alias"] > 0, "the donated train state is not aliased to the new one"
    assert report["hbm_gib"] == memory.HBM_GIB


def test_the_compiler_refuses_a_step_that_does_not_fit_a_chip(compiled):
    report = compiled["too_big"]
    assert report["fits"] is False and "CompileTimeHbmOom" in report["error"]


def test_the_fingerprint_names_the_program_and_only_it(tmp_path, tokenizer_file):
    one, again, bigger, sliced = (r["fingerprint"] for r in tpu_table.aot_reports([
        ("2x4", 1, _tiny(tmp_path, tokenizer_file, "--batch_size", "32")),
        ("2x4", 1, _tiny(tmp_path, tokenizer_file, "--batch_size", "32", "--log_every", "7")),
        ("2x4", 1, _tiny(tmp_path, tokenizer_file, "--batch_size", "64")),
        ("2x4", 2, _tiny(tmp_path, tokenizer_file, "--batch_size", "32")),
    ], lower_only=True))
    assert one == again
    assert len({one, bigger, sliced}) == 3


def test_the_memory_table_is_calibrated_on_the_compiler_s_figures():
    """trainers.gemma_jax.memory's estimate against every compiled shipped run."""
    for key, entry in TABLE.items():
        compiled_gib = entry["bytes"]["per_chip"] / compiled_hbm.GIB
        estimate = memory.estimate_run(memory.program_args(entry["key"]), entry["chips"], entry["key"]["slices"])
        assert abs(estimate.total_gib - compiled_gib) <= memory.CALIBRATION_TOLERANCE * compiled_gib, (
            f"{key}: memory.py says {estimate.total_gib:.2f} GiB, the compiler {compiled_gib:.2f} GiB")


MESH_CHECK = """
import json, sys
from trainers.gemma_jax import aot, sharding
devices = aot.topology_devices("2x4", 2)
out = {}
for requested in (1, 4, -1):
    fsdp = sharding.fsdp_size(requested, devices)
    mesh = sharding.make_mesh(fsdp, devices)
    groups = [[(d.slice_index, d.process_index) for d in row] for row in mesh.devices.tolist()]
    out[requested] = {"shape": list(mesh.devices.shape), "rows": groups}
print(json.dumps(out))
"""


def test_the_mesh_over_two_real_v6e_slices_keeps_fsdp_inside_a_slice():
    """sharding.make_mesh on the compile-only devices libtpu describes for two
    v6e 2x4 slices (slice index and host of each chip as GKE's VMs have them)."""
    env = cpu_env(1)
    done = subprocess.run([sys.executable, "-c", MESH_CHECK], cwd=REPO, env=env,
                          capture_output=True, text=True, check=True)
    meshes = {int(k): v for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}
    assert meshes[1]["shape"] == [16, 1] and meshes[4]["shape"] == [4, 4] and meshes[-1]["shape"] == [2, 8]
    for requested in (4, -1):
        for row in meshes[requested]["rows"]:  # one fsdp group: ICI only
            assert len({s for s, _ in row}) == 1, (requested, row)
    # The data axis spans both slices (DCN): each slice holds half of its rows.
    assert sorted(row[0][0] for row in meshes[-1]["rows"]) == [0, 1]
    assert sorted(row[0][0] for row in meshes[4]["rows"]) == [0, 0, 1, 1]
