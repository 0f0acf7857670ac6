"""The plan's model-memory section: each trainer run's model against its pool's chips.

The same figures the program's admission check refuses a run on (admission/accelerator_memory.py):
the TPU compiler's own where core/compiled_hbm.json has the run, else the TPU memory model, and the
GPU estimate (with the host memory a load needs). One's own container is its own business.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from admission import accelerator_memory, serving
from stack.config import StackConfig


def memory_rows(config: StackConfig, manifests: Mapping[str, Mapping]) -> list[dict[str, Any]]:
    contracts, rows = config.contracts(), []
    for run in config.runs:
        pod = manifests[run.name]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        found = accelerator_memory.run_memory(run, contracts[run.pool], pod["containers"][0])
        if found is None:
            rows.append({"run": run.name, "state": "own container" if run.trainer is None else "not estimated"})
            continue
        rows.append(_row(run.name, found))
    if getattr(config, "serve", None) is not None:  # the model server (admission/serving.py)
        rows.append(_row(f"serve {config.serve.run}", serving.chip_memory(config)))
    return rows


def _row(name: str, found) -> dict[str, Any]:
    if found is None:
        return {"run": name, "state": "not estimated"}
    return {"run": name, "state": "known", "model": found.model, "pool": found.pool, "needed_gib": found.needed_gib,
            "offered_gib": found.offered_gib, "margin_gib": found.margin_gib, "how": found.how,
            "host_needed_gib": found.host_needed_gib, "host_offered_gib": found.host_offered_gib, "fits": found.fits,
            "tight": found.tight}


def render_memory(rows: list[Mapping]) -> list[str]:
    if not rows:
        return ["  (no runs)"]
    lines = [f"  {'run':<24} {'model':<15} {'pool':<18} {'per chip':>11} {'chip':>11} {'kept free':>10}  source"]
    for r in rows:
        if r["state"] != "known":
            lines.append(f"  {r['run']:<24} {r['state']}")
            continue
        mark = "" if r["fits"] else "  DOES NOT FIT"
        if r.get("tight"):
            mark = "  TIGHT: within the estimate's tolerance; `make tpu-compile` for the compiler's figure"
        lines.append(f"  {r['run']:<24} {r['model']:<15} {r['pool']:<18} {r['needed_gib']:>7.2f} GiB "
                     f"{r['offered_gib']:>7.2f} GiB {r['margin_gib']:>6.1f} GiB  {r['how']}{mark}")
        if r["host_needed_gib"] is not None:
            lines.append(f"  {'':<24} host memory to load it: {r['host_needed_gib']:.0f} GiB of the container's "
                         f"{r['host_offered_gib']:.0f} GiB")
    return lines
