"""The plan's accelerator-memory section: the TPU compiler's figure per run.

core/compiled_hbm.json holds what the real TPU compiler assigns per chip
to each shipped TPU run's train step on its own slice (`make tpu-compile`;
the tests fail when it is not about the current code). The plan shows it
beside the node fit: the fit says the pod fits the VM, this says the step
fits the chips.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core import compiled_hbm
from core.catalog import Family
from core.trainers import TRAINERS


def _trainer_args(manifest: Mapping, entry_modules: set[str]) -> list[str] | None:
    for rjob in manifest.get("spec", {}).get("replicatedJobs", []):
        for container in rjob["template"]["spec"]["template"]["spec"]["containers"]:
            if entry_modules & set(container.get("command", [])):
                return list(container.get("args", []))
    return None


def hbm_rows(stack: str, manifests: Mapping[str, Mapping]) -> list[dict[str, Any]]:
    """One row per run of a TPU trainer: compiled, stale or never compiled."""
    entry = {t.image.entry_module for t in TRAINERS.values() if t.family is Family.TPU}
    rows = []
    for name, manifest in sorted(manifests.items()):
        args = _trainer_args(manifest, entry)
        if args is None:
            continue
        found = compiled_hbm.lookup(stack, name, args)
        row: dict[str, Any] = {"run": name, "margin_gib": compiled_hbm.MARGIN_GIB}
        if found is None:
            row["state"] = "not compiled"
        elif not found.current:
            row["state"] = "compiled for other flags"
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
            lines.append(f"  {r['run']:<24} {r['state']}: run `make tpu-compile`")
            continue
        used = "refused" if r["per_chip_gib"] is None else f"{r['per_chip_gib']:.2f} GiB"
        spare = "" if r["spare_gib"] is None else f"{r['spare_gib']:.2f} GiB"
        mark = "" if r["fits"] else f"  DOES NOT FIT (keep {r['margin_gib']} GiB free)"
        shape = f"v6e {r['topology']}" + (f" x{r['slices']}" if r["slices"] > 1 else "")
        lines.append(f"  {r['run']:<24} {shape:<10} {used:>10} {r['hbm_gib']:>6} GiB {spare:>9}{mark}")
    libtpu = sorted({r["libtpu"] for r in rows if r.get("libtpu")})
    lines.append(f"  The train step as the TPU compiler (libtpu {', '.join(libtpu) or '-'}) lays it out per chip,")
    lines.append(f"  compiled ahead of time for the run's slice (core/compiled_hbm.json); {rows[0]['margin_gib']} GiB must stay free.")
    return lines
