"""The compiler's HBM per chip for every shipped TPU run's program, kept in core/compiled_hbm.json.

    make tpu-compile        # .venv-jax; recompiles only programs the table lacks

Every gemma-jax run of a shipped stack's goldens (tests/golden/<stack>/) has a
program key: what its train step is built from (trainers/gemma_jax/memory.py
`program_key`: model, batch, sequence length, LoRA rank, FSDP, dtypes, loss
mask) and the slice its pods select (topology, the slices its JobSet
replicates). Each distinct key's program (`program_args`) is lowered and
fingerprinted, and compiled by the real TPU compiler (trainers/gemma_jax/aot.py,
one process per compile) unless the table already holds that fingerprint under
that key. tests/gemma_jax/test_compiled_hbm.py fails when a key's program no
longer has the table's fingerprint, so the table is always about the code as it
is; `make plan` shows the figure of each run's key, whatever the stack or the
run is called.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from core.compiled_hbm import GIB, TABLE, key_name  # noqa: E402  (pure data, no platform code)
from trainers.gemma_jax import memory  # noqa: E402  (standard library only)

GOLDEN = REPO / "tests" / "golden"
COMMAND = ["python", "-m", "trainers.gemma_jax.train"]
# Stacks of the repository root whose goldens are rendered (examples/ are
# the README's, not shipped).
NOT_SHIPPED = {"examples"}
TOPOLOGY = "cloud.google.com/gke-tpu-topology"
COMPUTE_CLASS = "cloud.google.com/compute-class"


def _compute_class_topology(stack: str, name: str) -> str:
    """Autopilot runs select a ComputeClass; its rungs name the topology."""
    path = GOLDEN / stack / "compute-classes" / f"computeclass-{name}.yaml"
    rungs = yaml.safe_load(path.read_text())["spec"]["priorities"]
    found = {r["tpu"]["topology"] for r in rungs if "tpu" in r}
    assert len(found) == 1, f"{path}: rungs of several topologies {found}"
    return found.pop()


def shipped_runs() -> list[dict]:
    """{run, args, topology, slices, key} of every shipped gemma-jax run (key: its program key)."""
    runs = []
    for path in sorted(GOLDEN.glob("*/*.yaml")):
        stack = path.parent.name
        manifest = yaml.safe_load(path.read_text())
        if stack in NOT_SHIPPED or manifest.get("kind") != "JobSet":
            continue
        for rjob in manifest["spec"]["replicatedJobs"]:
            pod = rjob["template"]["spec"]["template"]["spec"]
            container = pod["containers"][0]
            if container.get("command") != COMMAND:
                continue
            selector = pod.get("nodeSelector", {})
            topology = selector.get(TOPOLOGY) or _compute_class_topology(stack, selector[COMPUTE_CLASS])
            slices = rjob.get("replicas", 1)
            runs.append({"run": f"{stack}/{path.stem}", "args": container["args"], "topology": topology,
                         "slices": slices, "key": memory.program_key(container["args"], topology, slices)})
    return runs


def programs(runs: list[dict]) -> dict[str, dict]:
    """{key name: key} of the runs' distinct programs."""
    return {key_name(r["key"]): r["key"] for r in runs}


def _json_of(cmd: list[str]):
    """The JSON last line of a process of its own (the TPU plugin it loads
    stays out of the caller); its stderr's end when it fails."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: exit {done.returncode}\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def aot_args(topology: str, slices: int, args: list[str], *extra: str) -> dict:
    """One trainers.gemma_jax.aot process for trainer flags on a slice; its JSON report."""
    return _json_of([sys.executable, "-m", "trainers.gemma_jax.aot", "--topology", topology,
                     "--slices", str(slices), *extra, "--", *args])


def aot(key: dict, *extra: str) -> dict:
    """aot_args() of a program key's own flags."""
    return aot_args(key["topology"], key["slices"], memory.program_args(key), *extra)


def fingerprints(keys: dict[str, dict]) -> dict[str, str]:
    """{key name: fingerprint} of every program, lowered in this process (seconds each)."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from trainers.gemma_jax import aot  # pylint: disable=g-import-not-at-top

    return {name: aot.compile_run(memory.program_args(key), key["topology"], key["slices"],
                                  lower_only=True)["fingerprint"] for name, key in keys.items()}


def run_fingerprints(runs: list[dict]) -> dict[str, str]:
    """{run: fingerprint} of every run's own flags on its slice, lowered in this process."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from trainers.gemma_jax import aot  # pylint: disable=g-import-not-at-top

    return {r["run"]: aot.compile_run(r["args"], r["topology"], r["slices"], lower_only=True)["fingerprint"]
            for r in runs}


def aot_reports(cases: list[tuple[str, int, list[str]]], lower_only: bool = False) -> list[dict]:
    """aot_args()'s report of each (topology, slices, trainer flags), in order, all from one process of
    its own (JAX and the TPU plugin loaded once)."""
    return _json_of([sys.executable, __file__, "--aot", json.dumps({"cases": cases, "lower_only": lower_only})])


def _aot_reports(cases: list, lower_only: bool) -> list[dict]:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from trainers.gemma_jax import aot  # pylint: disable=g-import-not-at-top

    return [aot.compile_run(args, topology, slices, lower_only=lower_only) for topology, slices, args in cases]


def current_fingerprints() -> dict[str, dict[str, str]]:
    """{"programs": fingerprints() of every shipped program, "runs": run_fingerprints() of every shipped run},
    from a process of its own."""
    return _json_of([sys.executable, __file__, "--fingerprints"])


def read_table() -> dict:
    return json.loads(TABLE.read_text()) if TABLE.exists() else {"programs": {}}


def write_table(table: dict) -> None:
    TABLE.write_text(json.dumps(table, indent=2, sort_keys=True) + "\n")


def entry_of(key: dict, report: dict) -> dict:
    """A table entry from an aot report. Not kept: the lowering's time, and the report's own `fits` (no
    margin; core/compiled_hbm.py decides with the margin)."""
    return {**{k: v for k, v in report.items() if k not in ("lower_s", "fits", "topology", "slices")}, "key": key}


def update() -> dict:
    """Lowers every shipped program, compiles each one the table lacks, rewrites it."""
    old = read_table()["programs"]
    keys = programs(shipped_runs())
    current = fingerprints(keys)
    new = {}
    for name, key in sorted(keys.items()):
        entry = old.get(name)
        if entry is None or entry["fingerprint"] != current[name]:
            print(f"[compile] {name} ...", flush=True)
            entry = entry_of(key, aot(key))
            print(f"[compile] {name}: {json.dumps(entry)}", flush=True)
        new[name] = entry
        # Written after every program: an interrupted table run keeps the compiles it finished.
        write_table({"programs": {**old, **new}})
    table = {"programs": new}
    write_table(table)
    return table


def markdown_rows(table: dict, runs: list[dict]) -> list[str]:
    """The README's rows (trainers/gemma_jax/README.md, "Memory per chip on v6e"): each shipped run, its
    program's figure."""
    rows = []
    for run in sorted(runs, key=lambda r: r["run"]):
        e = table["programs"][key_name(run["key"])]
        shape = f"{run['topology']}" + (f" x{run['slices']}" if run["slices"] > 1 else "")
        per_chip = e.get("bytes", {}).get("per_chip")
        if per_chip is None:
            rows.append(f"| {run['run']} | {shape} | refused | - | {e['compile_s']:.0f} s |")
            continue
        gib = per_chip / GIB
        rows.append(f"| {run['run']} | {shape} | {gib:.2f} GiB | {e['hbm_gib'] - gib:.2f} GiB | {e['compile_s']:.0f} s |")
    return rows


if __name__ == "__main__":
    if sys.argv[1:] == ["--fingerprints"]:
        runs = shipped_runs()
        print(json.dumps({"programs": fingerprints(programs(runs)), "runs": run_fingerprints(runs)}))
        sys.exit(0)
    if sys.argv[1:2] == ["--aot"]:
        print(json.dumps(_aot_reports(**json.loads(sys.argv[2]))))
        sys.exit(0)
    table = update()
    print("\n".join(markdown_rows(table, shipped_runs())))
