"""The offline plan's cost table: chips, VMs, slices and on-demand $/hour of each pool and run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def cost(config) -> dict[str, Any]:
    """Chips, VMs, slices and on-demand $/hour of each pool and run, from the catalog."""
    if config is None:
        return {"pools": [], "runs": [], "total_usd_per_hour": 0.0}
    contracts = config.contracts()
    pools = []
    for group in config.accelerator_groups():
        contract = contracts[group.name]
        shape = contract.shape
        capacity = getattr(group, "capacity", "on-demand")
        usd_per_hour = shape.usd_per_hour(contract.slices)
        pools.append({
            "name": group.name,
            "shape": shape.description,
            "capacity": capacity,
            "slices": contract.slices,
            "vms": shape.vms_per_slice * contract.slices,
            "chips": contract.total_chips,
            # A VM priced whole (A4) shows its price per chip, for comparison.
            "usd_per_chip_hour": round(usd_per_hour / contract.total_chips, 2),
            "priced_per": "VM" if shape.machine.price else "chip",
            "price_as_of": shape.price_as_of,
            "price_source": shape.price_source,
            "usd_per_hour": round(usd_per_hour, 2),
            "note": shape.accelerator.on_demand_note if capacity == "on-demand" else "",
        })
    by_pool = {p["name"]: p for p in pools}
    runs = []
    for run in getattr(config, "runs", ()):
        pool = by_pool.get(run.pool)
        if pool is None:
            continue
        contract = contracts[run.pool]
        per_host = getattr(run, "chips_per_host", None) or contract.chips_per_host
        runs.append({
            "name": run.name,
            "trainer": run.trainer,
            "pool": run.pool,
            "slices": pool["slices"],
            "vms": pool["vms"],
            "chips": per_host * contract.hosts_per_slice * contract.slices,
            # A run holds whole VMs, so it costs its pool's VMs while it runs.
            "usd_per_hour": pool["usd_per_hour"],
            "suspended": bool(getattr(run, "suspend", False)),
        })
    return {
        "pools": pools,
        "runs": runs,
        "ladders": ladders(config, by_pool),
        "total_usd_per_hour": round(sum(p["usd_per_hour"] for p in pools), 2),
    }


def ladders(config, by_pool: Mapping[str, Mapping]) -> list[dict[str, Any]]:
    """Each capacity ladder: its rungs in order with their $/hour, and its worst case.

    The worst case is the dearest rung at list price (the last such, where
    rungs tie): what the run costs when Kueue (on Autopilot, GKE, by the run's
    ComputeClass) falls through to it.
    """
    found = []
    autopilot = bool(getattr(config, "autopilot", False))
    for run in getattr(config, "runs", ()):
        names = [run.pool, *getattr(run, "ladder", ())]
        if len(names) < 2 or not all(n in by_pool for n in names):
            continue
        rungs = [{"pool": n, "capacity": by_pool[n]["capacity"], "usd_per_hour": by_pool[n]["usd_per_hour"]}
                 for n in names]
        worst = max(range(len(rungs)), key=lambda i: (rungs[i]["usd_per_hour"], i))
        found.append({"run": run.name, "rungs": rungs, "worst": rungs[worst]["pool"],
                      "worst_usd_per_hour": rungs[worst]["usd_per_hour"],
                      "tried_by": f"GKE (ComputeClass ladder-{run.name})" if autopilot else "Kueue"})
    return found


def render_ladders(rows: list[Mapping]) -> list[str]:
    lines = []
    for ladder in rows:
        lines.append(f"  run {ladder['run']}: {ladder.get('tried_by', 'Kueue')} tries, in order")
        for i, rung in enumerate(ladder["rungs"], 1):
            mark = "  <- worst case" if rung["pool"] == ladder["worst"] else ""
            lines.append(f"    {i}. {rung['pool']:<24} {rung['capacity']:<11} {rung['usd_per_hour']:>9.2f}{mark}")
        lines.append(f"    worst case: {ladder['worst']}, {ladder['worst_usd_per_hour']:.2f} $/hour at list price")
    return lines


def render_cost(cost_data: Mapping) -> list[str]:
    lines = []
    pools = cost_data["pools"]
    if not pools:
        return ["  (no accelerator pools)"]
    as_of = sorted({p["price_as_of"] for p in pools})
    lines.append(f"  {'pool':<20} {'shape':<34} {'capacity':<11} {'slices':>6} {'VMs':>4} {'chips':>5} {'$/chip-h':>8} {'$/hour':>9}")
    for p in pools:
        lines.append(
            f"  {p['name']:<20} {p['shape']:<34} {p['capacity']:<11} {p['slices']:>6} {p['vms']:>4} "
            f"{p['chips']:>5} {p['usd_per_chip_hour']:>8.2f} {p['usd_per_hour']:>9.2f}"
        )
    lines.append(f"  {'total, every pool at full size':<86} {cost_data['total_usd_per_hour']:>9.2f}")
    lines += [f"  {p['name']}: {p['note']}" for p in pools if p.get("note")]
    if cost_data["runs"]:
        lines.append("")
        lines.append(f"  {'run':<24} {'trainer':<10} {'pool':<20} {'slices':>6} {'VMs':>4} {'chips':>5} {'$/hour':>9}")
        for r in cost_data["runs"]:
            note = "  (suspended)" if r["suspended"] else ""
            lines.append(
                f"  {r['name']:<24} {r['trainer']:<10} {r['pool']:<20} {r['slices']:>6} {r['vms']:>4} "
                f"{r['chips']:>5} {r['usd_per_hour']:>9.2f}{note}"
            )
    if cost_data.get("ladders"):
        lines += ["", "  Capacity ladders ($/hour of each rung's pool at full size)"] + render_ladders(cost_data["ladders"])
    lines.append("")
    lines.append(f"  On-demand list prices of {', '.join(as_of)} (core/catalog.py and core/machines.py give each source;")
    lines.append("  A4 is priced per VM: GPUs, vCPUs, memory and local SSDs together);")
    lines.append("  spot, reservations and committed use bill differently. Idle pools that scale to zero cost nothing.")
    return lines


def render_fit(rows: list[Mapping]) -> list[str]:
    """Per run and resource: what the pod requests beside what one node can give."""
    if not rows:
        return ["  (no runs)"]
    lines = [f"  {'run':<24} {'node':<30} {'resource':<18} {'requested':>11} {'allocatable':>12} {'headroom':>10}"
             f" {'margin':>9}"]
    for r in rows:
        mark = "" if r["fits"] else "  DOES NOT FIT"
        lines.append(f"  {r['run']:<24} {r['node']:<30} {r['resource']:<18} {r['requested']:>11} "
                     f"{r['allocatable']:>12} {r['headroom']:>10} {r.get('margin', ''):>9}{mark}".rstrip())
    lines.append("  Allocatable: the kubelet's capacity (the kernel's share of the machine taken off) less GKE's")
    lines.append("  reservations and eviction thresholds (core/allocatable.py). Margin: memory kept free beyond the")
    lines.append("  request for the capacity model's error; headroom must cover it.")
    return lines
