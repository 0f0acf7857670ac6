"""The offline plan's cost table: chips, VMs, slices and $/hour of each pool and run at its capacity's price.

Each pool is priced at its own capacity (core/prices.py): on demand at list price, Spot, flex-start
and queued (Dynamic Workload Scheduler) at the range their published discounts allow, a reservation
at the reserved capacity's on-demand rate (paid for every hour it exists, whether used or not). A ladder's rungs show each one's
price, and its worst case is the dearest rung at the top of its range.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core import prices
from core.names import RUNS_NAMESPACE, compute_class_name


def _pool_row(group, contract) -> dict[str, Any]:
    shape = contract.shape
    capacity = getattr(group, "capacity", "on-demand")
    price = prices.price(shape, capacity)
    low, high = prices.usd_per_hour(shape, capacity, contract.slices)
    list_price = prices.usd_per_hour(shape, "on-demand", contract.slices)[1]
    return {
        "name": group.name,
        "accelerator": shape.accelerator.name,
        "shape": shape.description,
        "capacity": capacity,
        "slices": contract.slices,
        "vms": shape.vms_per_slice * contract.slices,
        "chips": contract.total_chips,
        # A VM priced whole (A4) shows its price per chip, for comparison.
        "usd_per_chip_hour": round(high / contract.total_chips, 2),
        "usd_per_chip_hour_low": round(low / contract.total_chips, 2),
        "priced_per": price.unit,
        "price_as_of": price.as_of,
        "price_source": price.source,
        "price_note": price.note,
        "usd_per_hour": round(high, 2),
        "usd_per_hour_low": round(low, 2),
        "list_usd_per_hour": round(list_price, 2),
        "list_price_source": f"{prices.on_demand(shape).source}, read {prices.on_demand(shape).as_of}",
        "note": shape.accelerator.on_demand_note if capacity == "on-demand" else "",
    }


def cost(config) -> dict[str, Any]:
    """Chips, VMs, slices and $/hour (low, high) of each pool and run at its capacity, from the catalog."""
    if config is None:
        return {"pools": [], "runs": [], "ladders": [], "total_usd_per_hour": 0.0}
    contracts = config.contracts()
    pools = [_pool_row(group, contracts[group.name]) for group in config.accelerator_groups()]
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
            "trainer": run.label,
            "pool": run.pool,
            "slices": pool["slices"],
            "vms": pool["vms"],
            "chips": per_host * contract.hosts_per_slice * contract.slices,
            # A run holds whole VMs, so it costs its pool's VMs while it runs.
            "usd_per_hour": pool["usd_per_hour"],
            "usd_per_hour_low": pool["usd_per_hour_low"],
            "suspended": bool(getattr(run, "suspend", False)),
        })
    return {
        "pools": pools,
        "runs": runs,
        "serve": serve_row(config, by_pool),
        "ladders": ladders(config, by_pool),
        "total_usd_per_hour": round(sum(p["usd_per_hour"] for p in pools), 2),
        "total_usd_per_hour_low": round(sum(p["usd_per_hour_low"] for p in pools), 2),
    }


def serve_row(config, by_pool: Mapping[str, Mapping]) -> dict[str, Any] | None:
    """The model server's $/hour: a VM of its pool per server (single-host pools: a VM is a slice), at the pool's
    capacity; None without `serve:`."""
    serve = getattr(config, "serve", None)
    if serve is None or serve.pool not in by_pool:
        return None
    pool = by_pool[serve.pool]
    per_vm = (pool["usd_per_hour_low"] / pool["vms"], pool["usd_per_hour"] / pool["vms"])
    return {"run": serve.run, "pool": serve.pool, "replicas": serve.replicas, "capacity": pool["capacity"],
            "chips": pool["chips"] // pool["vms"] * serve.replicas,
            "usd_per_hour": round(per_vm[1] * serve.replicas, 2), "usd_per_hour_low": round(per_vm[0] * serve.replicas, 2)}


def ladders(config, by_pool: Mapping[str, Mapping]) -> list[dict[str, Any]]:
    """Each capacity ladder: its rungs in order with their $/hour at their capacity, and its worst case.

    The worst case is the rung dearest at the top of its price range (the last such, where rungs
    tie): what the run may cost when Kueue (on Autopilot, GKE, by the run's ComputeClass) falls
    through to it.
    """
    found = []
    autopilot = bool(getattr(config, "autopilot", False))
    for run in getattr(config, "runs", ()):
        names = list(dict.fromkeys([run.pool, *getattr(run, "ladder", ())]))
        if len(names) < 2 or not all(n in by_pool for n in names):
            continue
        rungs = [{key: by_pool[n][key] for key in ("capacity", "usd_per_hour", "usd_per_hour_low",
                                                   "price_source", "price_as_of")} | {"pool": n}
                 for n in names]
        worst = max(range(len(rungs)), key=lambda i: (rungs[i]["usd_per_hour"], i))
        found.append({"run": run.name, "rungs": rungs, "worst": rungs[worst]["pool"],
                      "worst_usd_per_hour": rungs[worst]["usd_per_hour"],
                      "tried_by": f"GKE (ComputeClass {ladder_class(config, run.name)})" if autopilot else "Kueue"})
    return found


def ladder_class(config: Any, run: str) -> str:
    """The ComputeClass of an Autopilot run's ladder (named after the stack's namespace)."""
    return compute_class_name(getattr(config, "runs_namespace", RUNS_NAMESPACE), run)


def money(low: float, high: float) -> str:
    """A $/hour figure, or the range its source allows."""
    return f"{high:.2f}" if low == high else f"{low:.2f}-{high:.2f}"


def render_ladders(rows: list[Mapping]) -> list[str]:
    lines = []
    for ladder in rows:
        lines.append(f"  run {ladder['run']}: {ladder.get('tried_by', 'Kueue')} tries, in order")
        for i, rung in enumerate(ladder["rungs"], 1):
            mark = "  <- worst case" if rung["pool"] == ladder["worst"] else ""
            price = money(rung.get("usd_per_hour_low", rung["usd_per_hour"]), rung["usd_per_hour"])
            lines.append(f"    {i}. {rung['pool']:<24} {rung['capacity']:<11} {price:>13}{mark}")
        lines.append(f"    worst case: {ladder['worst']}, at most {ladder['worst_usd_per_hour']:.2f} $/hour")
    return lines


def render_sources(pools: list[Mapping]) -> list[str]:
    """One line per distinct price the pools use: accelerator, capacity, unit price, date read, source."""
    seen, lines = set(), ["  Prices ($ per chip-hour, or per VM-hour where a VM is priced whole):"]
    for p in pools:
        key = (p["accelerator"], p["capacity"])
        if key in seen:
            continue
        seen.add(key)
        note = f"; {p['price_note']}" if p.get("price_note") else ""
        lines.append(f"    {p['accelerator']} {p['capacity']} per {p['priced_per']}, read {p['price_as_of']}{note}")
        lines.append(f"      {p['price_source']}")
        if p["capacity"] != "on-demand":
            lines.append(f"      of the on-demand list price: {p['list_price_source']}")
    return lines


def render_cost(cost_data: Mapping) -> list[str]:
    pools = cost_data["pools"]
    if not pools:
        return ["  (no accelerator pools)"]
    lines = [f"  {'pool':<20} {'shape':<34} {'capacity':<11} {'slices':>6} {'VMs':>4} {'chips':>5} "
             f"{'$/chip-h':>10} {'$/hour':>13}"]
    for p in pools:
        lines.append(
            f"  {p['name']:<20} {p['shape']:<34} {p['capacity']:<11} {p['slices']:>6} {p['vms']:>4} "
            f"{p['chips']:>5} {money(p.get('usd_per_chip_hour_low', p['usd_per_chip_hour']), p['usd_per_chip_hour']):>10} {money(p.get('usd_per_hour_low', p['usd_per_hour']), p['usd_per_hour']):>13}"
        )
    total = money(cost_data.get("total_usd_per_hour_low", cost_data["total_usd_per_hour"]), cost_data["total_usd_per_hour"])
    lines.append(f"  {'total, every pool at full size':<88} {total:>13}")
    lines += [f"  {p['name']}: {p['note']}" for p in pools if p.get("note")]
    if cost_data["runs"]:
        lines.append("")
        lines.append(f"  {'run':<24} {'trainer':<10} {'pool':<20} {'slices':>6} {'VMs':>4} {'chips':>5} {'$/hour':>13}")
        for r in cost_data["runs"]:
            note = "  (suspended)" if r["suspended"] else ""
            lines.append(
                f"  {r['name']:<24} {r['trainer']:<10} {r['pool']:<20} {r['slices']:>6} {r['vms']:>4} "
                f"{r['chips']:>5} {money(r.get('usd_per_hour_low', r['usd_per_hour']), r['usd_per_hour']):>13}{note}"
            )
    serve = cost_data.get("serve")
    if serve:
        price = money(serve["usd_per_hour_low"], serve["usd_per_hour"])
        lines += ["", f"  {'server (serve:)':<24} {'vLLM':<10} {serve['pool']:<20} {'':>6} {serve['replicas']:>4} "
                  f"{serve['chips']:>5} {price:>13}",
                  f"  serving run {serve['run']}'s export, {serve['replicas']} server(s) of a VM each, while it runs"
                  + (" (on the reservation, paid anyway)" if serve["capacity"] == "reservation" else "")]
    if cost_data.get("ladders"):
        lines += ["", "  Capacity ladders ($/hour of each rung's pool at full size, at its capacity's price)"]
        lines += render_ladders(cost_data["ladders"])
    lines += ["", *render_sources(pools)]
    lines.append("  A range is what the published discounts allow where Google publishes no figure; a reservation")
    lines.append("  is its reserved capacity's price, paid whether used or not. Idle pools that scale to zero cost nothing.")
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
