"""The scale benchmark's table (bench/scale.py): one line per case, then per-pod cost against the smallest."""

from __future__ import annotations

COMPONENTS = (("kube-apiserver", "apiserver"), ("etcd", "etcd"), ("kube-scheduler", "scheduler"),
              ("kube-controller-manager", "kcm"), ("jobset-manager", "jobset"), ("kueue-manager", "kueue"),
              ("kwok", "kwok"))


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(rows: list[dict]) -> list[str]:
    head = (f"{'slices':>6} {'nodes':>5} {'pods':>5} {'strategy':<13} {'queue':<6} {'bound s':>7} "
            f"{'running s':>9} {'exclusive':<9} {'load':>5} {'ms/pod':>6}  "
            + " ".join(f"{short + ' cores/MiB':>17}" for _, short in COMPONENTS))
    lines = [head]
    failed = [r for r in rows if "error" in r]
    rows = [r for r in rows if "error" not in r]
    for r in rows:
        parts = []
        for name, _ in COMPONENTS:
            u = r["components"].get(name)
            parts.append(f"{(str(u['peak_cores']) + '/' + str(u['peak_rss_mib'])) if u else '-':>17}")
        lines.append(f"{r['slices']:>6} {r['nodes']:>5} {r['pods']:>5} {r['strategy']:<13} "
                     f"{'kueue' if r['kueue'] else 'none':<6} {_fmt(r['bound_s'], '.1f'):>7} "
                     f"{_fmt(r['running_s'], '.1f'):>9} {r['exclusive'][:9]:<9} {r['load_before'][0]:>5} "
                     f"{r['net_cpu_ms_per_pod']:>6.1f}  " + " ".join(parts))
    lines += growth(rows)
    lines += [f"{r['slices']} slices {r['strategy']} {'kueue' if r['kueue'] else 'none'}: {r['error'][:300]}"
              for r in failed]
    return lines


def growth(rows: list[dict]) -> list[str]:
    """Per strategy and queue: seconds to bound per pod and CPU per pod at the largest size against the
    smallest (1.0: linear growth of the total; above: faster than linear)."""
    out = []
    keys = sorted({(r["strategy"], r["kueue"]) for r in rows})
    for strategy, kueue in keys:
        mine = sorted((r for r in rows if (r["strategy"], r["kueue"]) == (strategy, kueue) and r["bound_s"]),
                      key=lambda r: r["slices"])
        if len(mine) < 2 or mine[0]["slices"] == mine[-1]["slices"]:
            continue
        small, large = mine[0], mine[-1]
        time_ratio = (large["bound_s"] / large["pods"]) / (small["bound_s"] / small["pods"])
        cpu_ratio = large["net_cpu_ms_per_pod"] / small["net_cpu_ms_per_pod"] if small["net_cpu_ms_per_pod"] else None
        out.append(f"{strategy} {'kueue' if kueue else 'none'}: per pod at {large['slices']} slices against "
                   f"{small['slices']}: time to bound x{time_ratio:.2f}, CPU x{_fmt(cpu_ratio, '.2f')}")
    return out


# kube-scheduler's own throughput thresholds (pods scheduled per second, 5,000 nodes) for the workloads
# closest to a slice's pods: every pod with a required pod affinity (a leader's), and every pod with a
# required node affinity (a follower's node selector). k8s.io/kubernetes
# test/integration/scheduler_perf/affinity/performance-config.yaml: SchedulingPodAffinity
# 5000Nodes_5000Pods `threshold: 35`, SchedulingNodeAffinity 5000Nodes_10000Pods `threshold: 220`.
SCHEDULER_PERF = {"pod affinity": 35, "node affinity": 220}


def phase_table(rows: list[dict]) -> list[str]:
    """Per case: each phase's share of the wall time and its own rate, and what the scheduler did with a backlog."""
    head = (f"{'slices':>6} {'strategy':<13} {'queue':<6} {'JobSet>Jobs s':>13} {'>pods s':>8} {'created/s':>9} "
            f"{'>bound s':>8} {'bound/s':>7} {'w/backlog':>9} {'latency p50/p95':>16} {'follower wait p50/max':>21} "
            f"{'refused':>7}")
    lines = [head]
    for r in (r for r in rows if "phases" in r):
        p = r["phases"]
        lat, wait = p["schedule_latency"], p["follower_wait"]
        lines.append(f"{r['slices']:>6} {r['strategy']:<13} {'kueue' if r['kueue'] else 'none':<6} "
                     f"{_fmt(p['jobset_to_jobs_s'], '.1f'):>13} {_fmt(p['jobs_to_pods_created_s'], '.1f'):>8} "
                     f"{_fmt(p['pods_created_per_s'], '.1f'):>9} {_fmt(p['created_to_bound_s'], '.1f'):>8} "
                     f"{_fmt(p['pods_bound_per_s'], '.1f'):>7} {_fmt(p['bound_per_s_with_backlog'], '.1f'):>9} "
                     f"{_fmt(lat['p50'], '.2f') + '/' + _fmt(lat['p95'], '.2f'):>16} "
                     f"{_fmt(wait['p50'], '.1f') + '/' + _fmt(wait['max'], '.1f'):>21} {r.get('failed_creates', '-'):>7}")
    lines.append("kube-scheduler's scheduler_perf thresholds (pods/s, 5,000 nodes): "
                 + ", ".join(f"{k} {v}" for k, v in SCHEDULER_PERF.items()))
    return lines + growth_curve(rows)


def growth_curve(rows: list[dict]) -> list[str]:
    """Per strategy and queue: seconds to every pod bound per slice, at each size."""
    out = []
    for strategy, kueue in sorted({(r["strategy"], r["kueue"]) for r in rows}):
        mine = sorted((r for r in rows if (r["strategy"], r["kueue"]) == (strategy, kueue) and r.get("bound_s")),
                      key=lambda r: r["slices"])
        if mine:
            curve = ", ".join(f"{r['slices']}: {r['bound_s'] / r['slices']:.2f}" for r in mine)
            out.append(f"{strategy} {'kueue' if kueue else 'none'}: seconds per slice to bound, by slices: {curve}")
    return out
