"""The Google API check's cost on `make plan`: the plan with it vs without it, side by side in one run.

Run from the repository root in `.venv` (`make bench-google-api`, part of `make bench`):

    .venv/bin/python -m bench.google_api [--reps 5] [--stacks dev,a4] [--out bench/results/google_api.json]

Each measurement is a fresh interpreter, as each `make plan` is: it imports
the plan tool and times `tools.plan.collect.collect(stack)` (the program under the
mocks, the admission rules, the run manifests, the cost and fit tables and,
with the check, every Google Cloud request built and judged, the discovery
documents read from the pinned client on first use), with the check, and
with `google_requests` replaced by a no-op. Repetitions alternate the order;
reported per stack are the medians of the process's CPU time (all its
threads: steadier than wall time on a shared machine) and of wall time,
their ratios, and the check's own CPU time (cold: it includes importing the
client and parsing the documents). Timings vary with the machine and its
load; they are asserted nowhere.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parents[1]


def _child(stack: str, check: bool) -> dict:
    """In a fresh interpreter: one plan of `stack`, with or without the check; seconds."""
    sys.path.insert(0, str(REPO))
    from tools.plan import collect as collecting, google_api

    spent = {"check_cpu": 0.0, "check_wall": 0.0}
    real = google_api.google_requests

    def timed(deployment):
        cpu, wall = time.process_time(), time.perf_counter()
        try:
            return real(deployment)
        finally:
            spent["check_cpu"] += time.process_time() - cpu
            spent["check_wall"] += time.perf_counter() - wall

    replacement = timed if check else (lambda deployment: [])
    with mock.patch.object(collecting, "google_requests", replacement):
        cpu, wall = time.process_time(), time.perf_counter()
        result = collecting.collect(stack)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"plan_cpu_s": cpu, "plan_wall_s": wall, **spent, "requests": len(result["google"])}


def _measure(stack: str, check: bool) -> dict:
    command = [sys.executable, "-m", "bench.google_api", "--child", stack, "--check" if check else "--no-check"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"planning {stack} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(stacks: list[str], reps: int) -> dict:
    rows = []
    for stack in stacks:
        on, off = [], []
        for rep in range(reps):
            order = (True, False) if rep % 2 == 0 else (False, True)
            for check in order:
                (on if check else off).append(_measure(stack, check))
        def median(runs, key):
            return statistics.median(m[key] for m in runs)

        rows.append({
            "stack": stack,
            "requests_judged": on[0]["requests"],
            "plan_cpu_with_check_s": round(median(on, "plan_cpu_s"), 3),
            "plan_cpu_without_check_s": round(median(off, "plan_cpu_s"), 3),
            "cpu_ratio": round(median(on, "plan_cpu_s") / median(off, "plan_cpu_s"), 3),
            "plan_wall_with_check_s": round(median(on, "plan_wall_s"), 3),
            "plan_wall_without_check_s": round(median(off, "plan_wall_s"), 3),
            "wall_ratio": round(median(on, "plan_wall_s") / median(off, "plan_wall_s"), 3),
            "check_cpu_s": round(median(on, "check_cpu"), 3),
            "check_wall_s": round(median(on, "check_wall"), 3),
        })
    return {"benchmark": "google_api", "reps": reps, "python": platform.python_version(),
            "machine": platform.machine(), "rows": rows}


def _print(report: dict) -> None:
    print(f"{'':<25}{'CPU seconds of make plan':^34}{'wall seconds':^26}")
    print(f"{'stack':<16}{'requests':>9}{'check on':>10}{'off':>8}{'ratio':>7}{'check':>8}"
          f"{'on':>9}{'off':>8}{'ratio':>7}")
    for r in report["rows"]:
        print(f"{r['stack']:<16}{r['requests_judged']:>9}{r['plan_cpu_with_check_s']:>10.2f}"
              f"{r['plan_cpu_without_check_s']:>8.2f}{r['cpu_ratio']:>7.2f}{r['check_cpu_s']:>8.2f}"
              f"{r['plan_wall_with_check_s']:>9.2f}{r['plan_wall_without_check_s']:>8.2f}{r['wall_ratio']:>7.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.google_api", description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--stacks", default="", help="comma-separated; default: every shipped stack")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "google_api.json"))
    parser.add_argument("--child", metavar="STACK", help=argparse.SUPPRESS)
    parser.add_argument("--check", action=argparse.BooleanOptionalAction, default=True, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child, args.check)))
        return 0
    sys.path.insert(0, str(REPO))
    from bench import report as report_file
    from tools.offline import SHIPPED_STACKS

    report = run(args.stacks.split(",") if args.stacks else list(SHIPPED_STACKS), args.reps)
    _print(report)
    report_file.write(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
