"""The compiler's HBM per chip for every shipped TPU run, kept in core/compiled_hbm.json.

    make tpu-compile        # .venv-jax; recompiles only runs whose program changed

Every gemma-jax run of a shipped stack's goldens (tests/golden/<stack>/)
is lowered for its own slice (the topology its pods select, the slices its
JobSet replicates) and fingerprinted; each distinct program is compiled by
the real TPU compiler (trainers/gemma_jax/aot.py, one process per compile)
unless the table already holds that fingerprint. tests/gemma_jax/
test_compiled_hbm.py fails when a run's fingerprint is not the table's, so
the table is always about the code and the stacks as they are; `make plan`
shows its figures beside the offline fit.
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
from core.compiled_hbm import GIB, TABLE  # noqa: E402  (pure data, no platform code)

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
    """{key, args, topology, slices} of every shipped gemma-jax run."""
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
            runs.append({"key": f"{stack}/{path.stem}", "args": container["args"],
                         "topology": topology, "slices": rjob.get("replicas", 1)})
    return runs


def _json_of(cmd: list[str]):
    """The JSON last line of a process of its own (the TPU plugin it loads
    stays out of the caller); its stderr's end when it fails."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: exit {done.returncode}\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def aot(run: dict, *extra: str) -> dict:
    """One trainers.gemma_jax.aot process; its JSON report."""
    return _json_of([sys.executable, "-m", "trainers.gemma_jax.aot", "--topology", run["topology"],
                     "--slices", str(run["slices"]), *extra, "--", *run["args"]])


def fingerprints(runs: list[dict]) -> dict[str, str]:
    """{key: fingerprint} of every run, lowered in this process (seconds each)."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from trainers.gemma_jax import aot  # pylint: disable=g-import-not-at-top

    return {r["key"]: aot.compile_run(r["args"], r["topology"], r["slices"], lower_only=True)["fingerprint"]
            for r in runs}


def current_fingerprints() -> dict[str, str]:
    """fingerprints() of every shipped run, from a process of its own."""
    return _json_of([sys.executable, __file__, "--fingerprints"])


def read_table() -> dict:
    return json.loads(TABLE.read_text()) if TABLE.exists() else {"runs": {}}


def write_table(table: dict) -> None:
    TABLE.write_text(json.dumps(table, indent=2, sort_keys=True) + "\n")


def update() -> dict:
    """Lowers every run, compiles each program the table lacks, rewrites it."""
    old = read_table()["runs"]
    compiled = {e["fingerprint"]: e for e in old.values() if "compile_s" in e}
    new = {}
    runs = shipped_runs()
    current = fingerprints(runs)
    for run in runs:
        fp = current[run["key"]]
        if fp not in compiled:
            print(f"[compile] {run['key']}: v6e {run['topology']} x{run['slices']} ...", flush=True)
            compiled[fp] = aot(run)
            print(f"[compile] {run['key']}: {json.dumps(compiled[fp])}", flush=True)
        # Not kept: the lowering's time, and the report's own `fits` (no margin;
        # core/compiled_hbm.py decides with the margin).
        entry = {k: v for k, v in compiled[fp].items() if k not in ("lower_s", "fits")}
        new[run["key"]] = {**entry, "args": run["args"]}
        # Written after every run: an interrupted table run keeps the compiles it finished.
        write_table({"runs": {**old, **new}})
    table = {"runs": new}
    write_table(table)
    return table


def markdown_rows(table: dict) -> list[str]:
    """The README's rows (trainers/gemma_jax/README.md, "Memory per chip on v6e")."""
    rows = []
    for key, e in sorted(table["runs"].items()):
        shape = f"{e['topology']}" + (f" x{e['slices']}" if e["slices"] > 1 else "")
        per_chip = e.get("bytes", {}).get("per_chip")
        if per_chip is None:
            rows.append(f"| {key} | {shape} | refused | - | {e['compile_s']:.0f} s |")
            continue
        gib = per_chip / GIB
        rows.append(f"| {key} | {shape} | {gib:.2f} GiB | {e['hbm_gib'] - gib:.2f} GiB | {e['compile_s']:.0f} s |")
    return rows


if __name__ == "__main__":
    if sys.argv[1:] == ["--fingerprints"]:
        print(json.dumps(fingerprints(shipped_runs())))
        sys.exit(0)
    table = update()
    print("\n".join(markdown_rows(table)))
