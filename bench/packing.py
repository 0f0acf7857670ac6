"""Packed rows vs the GKE tutorial's one-story-per-padded-row, side by side.

Run from the repository root in `.venv-jax` (`make bench` does this):

    .venv-jax/bin/python -m bench.packing [--out bench/results/packing.json]

For each maxlen it measures, on the same generated stories (token lengths
log-normal, see bench/rows.py):

1. the useful-token fraction, real next-token targets / token slots, of the
   trainer's packed rows (`data.batches`: whole stories, best fit) and of
   padded rows, and the context-complete fraction: targets whose whole
   preceding story is in their segment (padded rows truncate long stories
   instead, see story_tokens_kept);
2. the real-target throughput of the trainer's jitted train step
   (`steps.make_train_step`, `tiny` model, trainer dtypes) on CPU, fed with
   batches of both layouts of the same shape. Batches are read from the
   pipelines before timing, so only `global_batch` + the step are timed, as
   in the trainer's step time. Warm-up steps (compilation) are excluded;
   each repetition alternates which layout runs first. Reported: the median
   over repetitions per layout, the ratio of those medians, and the median
   of the per-repetition ratios ("paired", steadier on a busy machine).

Prints a table and writes the figures, the settings and the machine facts as
JSON to --out. Timings vary with the machine; they are not asserted anywhere.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import statistics
import time

import jax
import jaxlib

from bench import rows as rows_lib
from trainers.gemma_jax import model as model_lib
from trainers.gemma_jax import sharding
from trainers.gemma_jax import steps
from bench import report as report_file

LAYOUTS = ("packed", "padded")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="bench/results/packing.json")
    p.add_argument("--maxlens", type=int, nargs="+", default=[256, 512])
    p.add_argument("--stories", type=int, default=4000)
    p.add_argument("--rows", type=int, default=8, help="batch rows of the train steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per layout")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--steps", type=int, default=20, help="timed steps per repetition")
    p.add_argument("--vocab", type=int, default=256, help="vocabulary of the tiny model")
    p.add_argument("--param_dtype", default="bfloat16")
    p.add_argument("--master_dtype", default="float32")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def pipelines(shard, maxlen: int, rows: int) -> dict:
    return {
        "packed": rows_lib.packed_batches(shard, maxlen=maxlen, rows=rows),
        "padded": rows_lib.padded_batches(shard, maxlen=maxlen, rows=rows),
    }


def fractions(shard, maxlen: int, rows: int) -> dict:
    """Useful-token fraction of both layouts over the whole shard."""
    total = shard.num_tokens
    out = {}
    for name, ds in pipelines(shard, maxlen, rows).items():
        f = rows_lib.target_fraction(ds)
        # Padding also loses the tail of every story longer than maxlen.
        f["story_tokens_kept"] = f["real_tokens"] / total
        out[name] = f
    return out


def make_trainer(args, maxlen: int):
    """The trainer's train step and a fresh state for the tiny model, one device."""
    mesh = sharding.make_mesh(1)
    model = model_lib.build_model("tiny", args.vocab, args.param_dtype, 0)
    optimizer = steps.make_optimizer(2e-5, 0)
    abstract = model_lib.with_dtype(model_lib.abstract_params(model, maxlen), args.master_dtype)
    state_sh = sharding.tree_shardings(mesh, steps.abstract_state(abstract, optimizer), 1)
    params = model_lib.init_params(model, maxlen, args.seed, state_sh["params"], False)
    state = steps.init_state(params, optimizer, state_sh, args.master_dtype)
    step = steps.make_train_step(model, optimizer, False, state_sh)
    return step, state, sharding.batch_sharding(mesh)


def run_steps(trainer, state, batches, rows: int):
    """Runs the steps; returns (state, seconds, real targets trained on)."""
    step, _, bsh = trainer
    counts = []
    t0 = time.perf_counter()
    for local in batches:
        state, m = step(state, {}, sharding.global_batch(local, bsh, rows))
        counts.append(m["target_tokens"])
    jax.block_until_ready(state)  # dispatch is async: wait before reading time
    seconds = time.perf_counter() - t0
    return state, seconds, int(sum(float(c) for c in counts))


def throughput(args, shard, maxlen: int) -> dict:
    """Median real-target tokens/s of the train step for both layouts."""
    need = args.warmup + args.reps * args.steps
    batches = {}
    for name, ds in pipelines(shard, maxlen, args.rows).items():
        batches[name] = list(itertools.islice(ds, need))
        if len(batches[name]) < need:
            raise SystemExit(f"--stories={args.stories}: too few {name} batches for the run")
    trainer = make_trainer(args, maxlen)
    state = trainer[1]
    for name in LAYOUTS:
        state, _, _ = run_steps(trainer, state, batches[name][: args.warmup], args.rows)
    per_rep = {name: [] for name in LAYOUTS}
    for rep in range(args.reps):
        order = LAYOUTS if rep % 2 == 0 else LAYOUTS[::-1]
        lo = args.warmup + rep * args.steps
        for name in order:
            chunk = batches[name][lo : lo + args.steps]
            state, seconds, targets = run_steps(trainer, state, chunk, args.rows)
            per_rep[name].append(
                {"seconds": seconds, "targets": targets, "tokens_per_s": targets / seconds}
            )
    out = {}
    for name, reps in per_rep.items():
        out[name] = {
            "median_tokens_per_s": statistics.median(r["tokens_per_s"] for r in reps),
            "median_step_s": statistics.median(r["seconds"] / args.steps for r in reps),
            "repetitions": reps,
        }
    return out


def machine() -> dict:
    return {
        "cpu_count": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "devices": [str(d) for d in jax.devices()],
    }


def measure(args, shard, maxlen: int) -> dict:
    f = fractions(shard, maxlen, args.rows)
    t = throughput(args, shard, maxlen)
    return {
        "maxlen": maxlen,
        "fraction": f,
        "fraction_ratio": f["packed"]["fraction"] / f["padded"]["fraction"],
        "throughput": t,
        "throughput_ratio": (
            t["packed"]["median_tokens_per_s"] / t["padded"]["median_tokens_per_s"]
        ),
        # Each repetition runs the two layouts back to back, so the median of
        # their per-repetition ratios is less sensitive to a busy machine.
        "throughput_ratio_paired_median": statistics.median(
            p["tokens_per_s"] / q["tokens_per_s"]
            for p, q in zip(t["packed"]["repetitions"], t["padded"]["repetitions"])
        ),
    }


def table(results: list[dict]) -> str:
    head = (
        f"{'maxlen':>6} | {'useful packed':>13} | {'useful padded':>13} | {'ratio':>5} | "
        f"{'complete p/p':>12} | "
        f"{'tok/s packed':>12} | {'tok/s padded':>12} | {'ratio':>5} | {'paired':>6} | "
        f"{'step ms p/p':>11}"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        f, t = r["fraction"], r["throughput"]
        steps_ms = "/".join(f"{t[n]['median_step_s'] * 1e3:.0f}" for n in LAYOUTS)
        lines.append(
            f"{r['maxlen']:>6} | {f['packed']['fraction']:>13.3f} | "
            f"{f['padded']['fraction']:>13.3f} | {r['fraction_ratio']:>5.2f} | "
            f"{f['packed']['context_complete']:>5.3f}/{f['padded']['context_complete']:.3f} | "
            f"{t['packed']['median_tokens_per_s']:>12.0f} | "
            f"{t['padded']['median_tokens_per_s']:>12.0f} | "
            f"{r['throughput_ratio']:>5.2f} | {r['throughput_ratio_paired_median']:>6.2f} | "
            f"{steps_ms:>11}"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()
    lengths = rows_lib.story_lengths(args.stories, args.seed)
    shard = rows_lib.make_shard(lengths, args.vocab, args.seed)
    results = [measure(args, shard, maxlen) for maxlen in args.maxlens]
    report = {
        "machine": machine(),
        "settings": {k: v for k, v in vars(args).items() if k != "out"},
        "story_lengths": {
            "distribution": (
                f"log-normal, median {rows_lib.LENGTH_MEDIAN:g}, sigma {rows_lib.LENGTH_SIGMA:g}, "
                f"clipped to [{rows_lib.LENGTH_MIN}, {rows_lib.LENGTH_MAX}], BOS and EOS included"
            ),
            **rows_lib.length_summary(lengths),
        },
        "results": results,
        "wall_s": time.perf_counter() - t0,
    }
    s = report["story_lengths"]
    print(
        f"{args.stories} stories, tokens mean {s['mean']:.0f} p50 {s['p50']:.0f} "
        f"p90 {s['p90']:.0f} p99 {s['p99']:.0f} max {s['max']}; batch {args.rows} rows; "
        f"{machine()['cpu_count']} CPUs, jax {jax.__version__}"
    )
    print(table(results))
    report_file.write(report, args.out)
    print(f"({report['wall_s']:.0f}s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
