"""The plan's accelerator-memory section: the TPU compiler's figure per run.

core/compiled_hbm.json holds what the real TPU compiler assigns per chip to
a train step's program on its slice, keyed by what determines it (the
trainer's memory module derives a run's key from its flags, with its pool's
topology and slices), so a copied stack or a renamed run keeps its figure.
The plan shows it beside the node fit: the fit says the pod fits the VM,
this says the step fits the chips; a run whose program was never compiled
says so, and which program that is.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from core import compiled_hbm
from core.catalog import Family


def _trainer_args(manifest: Mapping, entry_module: str) -> list[str] | None:
    for rjob in manifest.get("spec", {}).get("replicatedJobs", []):
        for container in rjob["template"]["spec"]["template"]["spec"]["containers"]:
            if entry_module in container.get("command", []):
                return list(container.get("args", []))
    return None


def hbm_rows(config, manifests: Mapping[str, Mapping]) -> list[dict[str, Any]]:
    """One row per run of a TPU trainer with a memory module: compiled, or no figure for its program."""
    contracts, rows = config.contracts(), []
    for run in sorted(config.runs, key=lambda r: r.name):
        contract = contracts.get(run.pool)
        if run.trainer is None or contract is None or contract.family is not Family.TPU or not run.row.memory_module:
            continue
        args = _trainer_args(manifests.get(run.name, {}), run.row.image.entry_module)
        if args is None:
            continue
        key = importlib.import_module(run.row.memory_module).program_key(args, contract.shape.topology,
                                                                         contract.slices)
        found = compiled_hbm.lookup(key)
        row: dict[str, Any] = {"run": run.name, "margin_gib": compiled_hbm.MARGIN_GIB,
                               "program": compiled_hbm.describe(key), "key": key}
        if found is None:
            row["state"] = "not compiled"
        else:
            row.update(state="compiled", topology=found.topology, slices=found.slices,
                       per_chip_gib=found.per_chip_gib, hbm_gib=found.hbm_gib,
                       spare_gib=found.spare_gib, fits=found.fits, libtpu=found.libtpu)
        rows.append(row)
    return rows


def render_hbm(rows: list[Mapping]) -> list[str]:
    if not rows:
        return ["  (no TPU runs)"]
    lines = [f"  {'run':<24} {'slice':<10} {'per chip':>10} {'HBM':>10} {'spare':>9}"]
    for r in rows:
        if r["state"] != "compiled":
            lines.append(f"  {r['run']:<24} no compiler figure for its program ({r['program']}); the memory "
                         "model's estimate stands: `make tpu-compile` compiles the shipped stacks' programs")
            continue
        used = "refused" if r["per_chip_gib"] is None else f"{r['per_chip_gib']:.2f} GiB"
        spare = "" if r["spare_gib"] is None else f"{r['spare_gib']:.2f} GiB"
        mark = "" if r["fits"] else f"  DOES NOT FIT (keep {r['margin_gib']} GiB free)"
        shape = f"v6e {r['topology']}" + (f" x{r['slices']}" if r["slices"] > 1 else "")
        lines.append(f"  {r['run']:<24} {shape:<10} {used:>10} {r['hbm_gib']:>6} GiB {spare:>9}{mark}")
    libtpu = sorted({r["libtpu"] for r in rows if r.get("libtpu")})
    lines.append(f"  The train step as the TPU compiler (libtpu {', '.join(libtpu) or '-'}) lays it out per chip,")
    lines.append("  compiled ahead of time for the run's slice (core/compiled_hbm.json, keyed by the program: model, "
                 f"batch, length, LoRA rank, slice); {rows[0]['margin_gib']} GiB must stay free.")
    return lines
