"""Training time blocked by an asynchronous checkpoint save of the Gemma 3
270M train state, against the save interval, in one run.

    .venv-jax/bin/python -m bench.checkpoint [--out bench/results/checkpoint.json]

One CPU device, the trainer's own pieces: the 270M (real shapes, random
init, 262,144-piece vocabulary) with float32 masters and Adam moments
(`steps.init_state`, about 3.2 GB), its jitted train step on packed rows
(`data.batches`), and `checkpointing.Checkpointer` (Orbax, async) saving
state + grain data position + metadata to a local directory. Measured:

- step time without any save in flight (median over --steps);
- blocked: how long `Checkpointer.save` holds the loop (the device-to-host
  copy; the write then runs in the background), median over --saves;
- the median step time while the background write runs, and how long the
  write takes to finish after the call returns;
- from those, the share of training time lost per save at --save_every N
  steps: (blocked + extra step time during the write) / (N x step time).

One real-size process (about 10 GB); timings vary with the machine and are
not asserted anywhere.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time

import jax

from bench import rows as rows_lib
from trainers.gemma_jax import checkpointing
from trainers.gemma_jax import data
from trainers.gemma_jax import model as model_lib
from trainers.gemma_jax import sharding
from trainers.gemma_jax import steps
from bench import report as report_file

VOCAB = 262_144


def build(maxlen: int, batch: int):
    mesh = sharding.make_mesh(1)
    model = model_lib.build_model("gemma3-270m", VOCAB, "bfloat16", 0)
    optimizer = steps.make_optimizer(2e-5, 0)
    abstract = model_lib.with_dtype(model_lib.abstract_params(model, maxlen), "float32")
    state_sh = sharding.tree_shardings(mesh, steps.abstract_state(abstract, optimizer), 1)
    params = model_lib.init_params(model, maxlen, 0, state_sh["params"], False)
    state = steps.init_state(params, optimizer, state_sh, "float32")
    step = steps.make_train_step(model, optimizer, False, state_sh)
    shard = rows_lib.make_shard(rows_lib.story_lengths(4000, 0), VOCAB, 0)
    batches = iter(data.batches([shard], maxlen=maxlen, rows_per_shard=batch, seed=0, epochs=1, shuffle=True))
    return state, step, batches, sharding.batch_sharding(mesh)


def timed_step(step, state, batches, bsh, batch: int):
    t0 = time.perf_counter()
    state, m = step(state, {}, sharding.global_batch(next(batches), bsh, batch))
    jax.block_until_ready((state, m))
    return state, time.perf_counter() - t0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="bench/results/checkpoint.json")
    p.add_argument("--maxlen", type=int, default=128)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--steps", type=int, default=4, help="timed steps without a save")
    p.add_argument("--saves", type=int, default=2)
    p.add_argument("--save_every", type=int, nargs="+", default=[50, 200, 1000])
    args = p.parse_args(argv)
    state, step, batches, bsh = build(args.maxlen, args.batch)
    state, _ = timed_step(step, state, batches, bsh, args.batch)  # compile
    plain = []
    for _ in range(args.steps):
        state, dt = timed_step(step, state, batches, bsh, args.batch)
        plain.append(dt)
    directory = tempfile.mkdtemp(prefix="ckpt-bench-")
    ckpt = checkpointing.Checkpointer(directory, keep=1)
    blocked, during, finish = [], [], []
    try:
        for n in range(1, args.saves + 1):
            t0 = time.perf_counter()
            ckpt.save(n, state, batches, {"bench": n})
            blocked.append(time.perf_counter() - t0)
            t_done = time.perf_counter()
            while ckpt._mngr.is_saving_in_progress():  # pylint: disable=protected-access
                state, dt = timed_step(step, state, batches, bsh, args.batch)
                during.append(dt)
            finish.append(time.perf_counter() - t_done)
        ckpt.close()
        size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(directory) for f in fs)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    step_s, blocked_s = statistics.median(plain), statistics.median(blocked)
    during_s = statistics.median(during) if during else step_s
    extra = max(0.0, (during_s - step_s) * len(during) / args.saves)
    share = {str(n): (blocked_s + extra) / (n * step_s) for n in args.save_every}
    report = {
        "settings": {k: v for k, v in vars(args).items() if k != "out"},
        "cpu_count": os.cpu_count(),
        "state_bytes_on_disk": size,
        "step_s": step_s,
        "blocked_per_save_s": blocked_s,
        "blocked_per_save_in_steps": blocked_s / step_s,
        "step_s_during_background_write": during_s,
        "steps_during_background_write": len(during) / args.saves,
        "background_write_s": statistics.median(finish),
        "lost_share_of_training_time_per_save_interval": share,
        "raw": {"plain": plain, "blocked": blocked, "during": during, "finish": finish},
    }
    print(
        f"270M state {size / 1e9:.2f} GB on disk; step {step_s:.2f}s (batch {args.batch} x {args.maxlen}, "
        f"{os.cpu_count()} CPUs); save blocks {blocked_s:.2f}s = {blocked_s / step_s:.2f} steps; "
        f"write finishes {statistics.median(finish):.1f}s later, steps meanwhile {during_s:.2f}s"
    )
    print(" | ".join(f"--save_every {n}: {v:.2%} of training time" for n, v in share.items()))
    report_file.write(report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
