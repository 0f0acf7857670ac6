"""Multislice runs of thousands of TPU hosts through the real control plane: how long until every pod
is bound and running, and what it costs the API server and each manager (`make bench-scale`).

    .venv/bin/python -m bench.scale [--slices 4,16,64] [--strategies affinity,node-selector]
        [--queues none,kueue] [--reps 1] [--out bench/results/scale.json]

Each case is a stack declared by the program (tools/offline.py, the mocks `make plan` uses) as a
user would write it: the shipped `tpu-multislice` stack with its pool made `slices` slices of TPU
v6e 16x16 (64 ct6e-standard-4t VMs each) and one run on it, through Kueue (the run has a
`priority`) or not. Each case gets a control plane of its own (e2e/harness: etcd, kube-apiserver,
controller-manager, scheduler, kwok with one node per VM, the JobSet and Kueue managers), on which
the stack is installed as `pulumi up` would, all but the run; then the run's JobSet is applied and
a watch records when each pod is created, bound and running, while /proc is sampled for each
program's CPU and memory (bench/scale_sample.py). Reported per case: seconds from the JobSet's
creation to every pod bound and to every pod running, each program's busiest second (cores),
CPU seconds and peak RSS, the CPU seconds per pod, and whether exclusive placement held (each
slice's pods on one node pool of the 16x16 topology, no node pool shared by two slices).

Exclusive placement is JobSet's (`alpha.jobset.sigs.k8s.io/exclusive-topology`); `--strategies`
sets how: `affinity` is what the program declares, JobSet's pod affinity and anti-affinity (its pod
webhook); `node-selector` is JobSet's node-selector strategy, the node pools labelled and tainted
per slice and the run annotated (bench/scale_placement.py). The figures decided that the program
keeps pod affinity (docs/benchmarks.md, "Performance at scale").

Cases alternate strategies within a size and sizes run small to large; `--reps` repeats the lot.
The load average before each case is recorded with it: the machine is shared, and figures
vary with it. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

from bench import report
from bench.scale_run import Case, run_case
from bench.scale_table import phase_table, table

REPO = Path(__file__).resolve().parents[1]


def cases(slices: list[int], strategies: list[str], queues: list[str], reps: int, qps: list[int]) -> list[Case]:
    out = []
    for rep in range(reps):
        for n in slices:
            for rate in qps:
                for queue in queues:
                    order = strategies if rep % 2 == 0 else list(reversed(strategies))
                    out += [Case(n, strategy, queue == "kueue", rep, rate) for strategy in order]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.scale", description=__doc__.splitlines()[0])
    parser.add_argument("--slices", default="4,16,64")
    parser.add_argument("--strategies", default="affinity,node-selector")
    parser.add_argument("--queues", default="none,kueue")
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--api-qps", default="100",
                        help="the controller-manager's and scheduler's client rates to run, comma-separated; "
                             "0: their defaults")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds a case may take to run every pod")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "scale.json"))
    args = parser.parse_args(argv)
    todo = cases([int(s) for s in args.slices.split(",")], args.strategies.split(","),
                 args.queues.split(","), args.reps, [int(q) for q in args.api_qps.split(",")])
    state = Path(tempfile.mkdtemp(prefix="gke-finetune-scale-"))
    rows = []
    started = time.monotonic()
    result = {"benchmark": "scale", "python": platform.python_version(), "machine": platform.machine(),
              "cpus": os.cpu_count(), "rows": rows}
    for case in todo:
        print(f"-- {case.label()}", flush=True)
        try:
            row = run_case(case, state / case.label(), args.timeout)
        except (TimeoutError, RuntimeError) as err:  # a case that can't start is reported, the others run
            row = {**dataclasses.asdict(case), "error": str(err)[:2000]}
        shutil.rmtree(state / case.label(), ignore_errors=True)  # etcd's data of thousands of objects
        rows.append(row)
        print(json.dumps({k: row.get(k) for k in ("slices", "strategy", "kueue", "api_qps", "bound_s", "running_s",
                                                   "exclusive", "load_before", "error")}), flush=True)
        result["wall_s"] = round(time.monotonic() - started, 1)
        report.write(result, args.out)  # after each case: a long run keeps what it measured
    shutil.rmtree(state, ignore_errors=True)
    for line in table(rows) + phase_table(rows):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
