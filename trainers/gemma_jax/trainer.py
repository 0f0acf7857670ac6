"""The run: resume or start, train, evaluate, checkpoint, sample.

Exit codes (trainers/exit_codes.py): 0 when the planned steps are done and the
final checkpoint is written; 143 after SIGTERM, once the checkpoint of the
last finished step is written; 78 on a configuration error.
"""

from __future__ import annotations

import os
import signal
import time

from gemma import gm
import jax
from jax.experimental import multihost_utils
import numpy as np

from trainers import exit_codes
from trainers import progress as progress_lib
from trainers.gemma_jax import checkpointing, model_eval
from trainers.gemma_jax import cli
from trainers.gemma_jax import components as comp
from trainers.gemma_jax import data
from trainers.gemma_jax import metrics as metrics_lib
from trainers.gemma_jax import model as model_lib
from trainers.gemma_jax import sharding
from trainers.gemma_jax import steps

log = comp.log


class StopSignal:
    """Tells the loop when to checkpoint and stop after SIGTERM.

    With jax.distributed, JAX's preemption service catches SIGTERM and picks a
    step that every process reaches, so all of them save the same step. A
    single process without it uses a plain signal handler.
    """

    def __init__(self, distributed: bool):
        self._distributed = distributed
        self._flag = False
        if not distributed:
            signal.signal(signal.SIGTERM, self._handler)

    def _handler(self, signum, frame):
        del signum, frame
        self._flag = True
        print("[signal] SIGTERM: checkpointing after this step", flush=True)

    def requested(self, step: int) -> bool:
        if self._distributed:
            return multihost_utils.reached_preemption_sync_point(step)
        return self._flag


def sample(parts: comp.ModelParts, params, cfg: cli.Config, when: str) -> str | None:
    """Greedy continuation of the tutorial's sample prompt (all processes take part)."""
    if not cfg.sample_tokens:
        return None
    sampler = gm.text.Sampler(
        model=parts.model,
        params=params,
        tokenizer=parts.tokenizer,
        cache_length=1024,
        max_out_length=cfg.sample_tokens + 8,
    )
    out = sampler.sample(cfg.sample_prompt, max_new_tokens=cfg.sample_tokens)
    log(f"[sample {when}] {cfg.sample_prompt!r} -> {out!r}")
    return out


def evaluate(eval_step, state, frozen, plan: comp.DataPlan, bsh, rows: int) -> float | None:
    """Token-weighted mean loss over the held-out batches."""
    if not plan.eval_steps:
        return None
    it = iter(plan.eval)
    total = count = 0.0
    for _ in range(plan.eval_steps):
        batch = sharding.global_batch(next(it), bsh, rows)
        s, c = eval_step(state["params"], frozen, batch)
        total, count = total + float(s), count + float(c)
    return total / max(count, 1.0)


def restore_or_init(cfg, parts, plan, ckpt, meta):
    """(state, data iterator, start step): newest good checkpoint or fresh."""
    try:
        restored = ckpt.restore_latest(parts.abstract_state, lambda: iter(plan.train), meta)
    except checkpointing.RestoreMismatch as e:
        raise cli.ConfigError(f"settings differ from the checkpoint: {e}") from None
    except checkpointing.NoUsableCheckpoint as e:
        raise cli.ConfigError(f"--checkpoint_dir={cfg.checkpoint_dir}: {e}") from None
    if restored is None:
        log("[checkpoint] none found; starting from step 0")
        return comp.fresh_state(cfg, parts), iter(plan.train), 0
    step, state, data_iter = restored
    log(f"[checkpoint] resumed from step {step} in {ckpt.directory}")
    return state, data_iter, step


class Loop:
    """The step loop and what happens around each step."""

    def __init__(self, cfg, layout, parts, plan, frozen, ckpt, meta, progress):
        self.cfg, self.layout, self.parts, self.plan = cfg, layout, parts, plan
        self.frozen, self.ckpt, self.meta, self.progress = frozen, ckpt, meta, progress
        self._tracing = False  # a profile trace started by this process (_profile)
        self.bsh = sharding.batch_sharding(layout.mesh)
        self.train_step = steps.make_train_step(
            parts.model, parts.optimizer, parts.lora, parts.state_shardings
        )
        self.eval_step = steps.make_eval_step(parts.model, parts.lora)
        self.writer = metrics_lib.MetricsWriter(cfg.log_dir, jax.process_index() == 0)
        self.samples = metrics_lib.SampleLog(cfg.log_dir, cfg.log_samples)
        total = metrics_lib.count_params(parts.abstract_state["params"]) + metrics_lib.count_params(
            parts.abstract_frozen
        )
        trainable = metrics_lib.count_params(parts.abstract_state["params"])
        config = getattr(parts.model, "model", parts.model).config
        all_params = (parts.abstract_state["params"], parts.abstract_frozen)
        self.flops_per_step = (
            cfg.batch_size
            * cfg.maxlen
            * metrics_lib.flops_per_token(
                all_params, parts.abstract_state["params"], config, cfg.maxlen
            )
        )
        log(
            f"[model] {cfg.model}: {total / 1e6:.2f}M params, "
            f"{trainable / 1e6:.2f}M trainable, mesh {dict(layout.mesh.shape)}"
        )

    def _log_train(self, step, m, timer):
        jax.block_until_ready(m)  # dispatch is async: wait before reading time
        dt, _ = timer.lap()
        values = {
            "loss": float(m["loss"]),
            "grad_norm": float(m["grad_norm"]),
            "step_time_s": dt,
            "tokens_per_s": float(m["real_tokens"]) / dt,
            "progress": step / self.plan.total_steps,
        }
        if self.cfg.peak_flops_per_device:
            values["mfu"] = (
                self.flops_per_step / dt / (self.cfg.peak_flops_per_device * jax.device_count())
            )
        self.writer.scalars(step, values)
        self.progress.trained(step, dt, values["loss"], values["tokens_per_s"])

    def _save(self, step, state, data_iter):
        self.ckpt.save(step, state, data_iter, self.meta)
        self._report_durable()

    def _close_checkpoints(self):
        self.ckpt.close()
        self._report_durable()

    def _report_durable(self):
        """The progress record names a checkpoint once its async write is known to be whole (the next save or
        the close waits for it), not when it starts: a pod lost in between resumes from the one before, and
        `make status` must not promise more."""
        if self.ckpt.durable_step is not None:
            self.progress.checkpointed(self.ckpt.durable_step)

    def evaluate_at(self, step, state):
        loss = evaluate(
            self.eval_step, state, self.frozen, self.plan, self.bsh, self.cfg.batch_size
        )
        if loss is not None:
            self.writer.scalars(step, {"loss": loss}, prefix="eval")
            self.progress.evaluated(step, loss)
        return loss

    def _profile(self, step, state, start: bool):
        # A run resumed inside the window (a restart after a checkpoint at a step in it) never saw its
        # first step here: it traces nothing, rather than stopping a trace that was never started
        # (jax.profiler.stop_trace raises "No profile started").
        prof = self.cfg.profile_steps
        if prof and start and step == prof[0]:
            jax.profiler.start_trace(self.cfg.log_dir)
            self._tracing = True
        if prof and not start and step == prof[1] and self._tracing:
            jax.block_until_ready(state)
            jax.profiler.stop_trace()
            self._tracing = False
            log(f"[xprof] trace of steps {prof[0]}-{prof[1]} in {self.cfg.log_dir}")

    def run(self, state, data_iter, start: int, stop: StopSignal) -> int:
        """Trains steps start+1..total; returns the process exit code."""
        timer = metrics_lib.StepTimer()
        cfg = self.cfg
        for step in range(start + 1, self.plan.total_steps + 1):
            local = next(data_iter)
            batch = sharding.global_batch(local, self.bsh, cfg.batch_size)
            self._profile(step, state, start=True)
            state, m = self.train_step(state, self.frozen, batch)
            self._profile(step, state, start=False)
            self.samples.write(step, data.consumed_stories(local))
            timer.tick()
            if step == start + 1:  # exclude compilation from the step times
                self.writer.scalars(
                    step, {"loss": float(m["loss"]), "grad_norm": float(m["grad_norm"])}
                )
                log(f"[train] first step (with compilation) done at step {step}")
                self.progress.first_step(step, float(m["loss"]))
                timer.lap()
            elif step % cfg.log_every == 0 or step == self.plan.total_steps:
                self._log_train(step, m, timer)
            if cfg.eval_every and step % cfg.eval_every == 0:
                self.evaluate_at(step, state)
                timer.lap()  # keep eval time out of the train step time
            if step % cfg.save_every == 0:
                self._save(step, state, data_iter)
                timer.lap()
            if stop.requested(step):
                return self._terminate(step, state, data_iter)
        return self._finish(state, data_iter)

    def _terminate(self, step, state, data_iter) -> int:
        self._save(step, state, data_iter)
        self._close_checkpoints()
        self.samples.close()
        log(f"[signal] checkpoint of step {step} written; exiting {exit_codes.TERMINATED}")
        return exit_codes.TERMINATED

    def _finish(self, state, data_iter) -> int:
        step = self.plan.total_steps
        if not (self.cfg.eval_every and step % self.cfg.eval_every == 0):
            self.evaluate_at(step, state)
        self._save(step, state, data_iter)
        self._close_checkpoints()
        self.samples.close()
        self.state = state
        log(f"[train] done: {step} steps; final checkpoint in {self.ckpt.directory}")
        return exit_codes.OK


def inspect(cfg: cli.Config, plan: comp.DataPlan) -> int:
    """Writes the first --inspect_batches batches of this process; no training."""
    it = iter(plan.train)
    count = min(cfg.inspect_batches, plan.total_steps)
    arrays = data.inspect_arrays([next(it) for _ in range(count)])
    path = cfg.inspect_out
    if jax.process_count() > 1:
        root, ext = os.path.splitext(path)
        path = f"{root}-p{jax.process_index()}{ext}"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    np.savez(path, **arrays)
    print(f"[inspect] {count} batches of process {jax.process_index()} -> {path}", flush=True)
    return exit_codes.OK


def open_progress(cfg: cli.Config, plan: comp.DataPlan, start: int, started: float) -> progress_lib.Progress:
    """The run's progress record, kept by process 0 beside the checkpoints (a local or FUSE-mounted
    directory; none for a gs:// checkpoint directory)."""
    owner = jax.process_index() == 0 and "://" not in cfg.checkpoint_dir
    progress = progress_lib.Progress(cfg.checkpoint_dir, "gemma-jax", plan.total_steps, started, owner)
    progress.resumed(start)
    return progress


def run(cfg: cli.Config) -> int:
    """The whole run; returns the exit code."""
    started = time.time()
    distributed = sharding.initialize_distributed(
        cfg.distributed, cfg.coordinator_address, cfg.num_processes, cfg.process_id
    )
    stop = StopSignal(distributed)
    if cfg.xprof_port:
        jax.profiler.start_server(cfg.xprof_port)
    log(
        f"[setup] jax {jax.__version__}, {jax.process_count()} processes, "
        f"{jax.device_count()} {jax.devices()[0].platform} devices"
    )
    t0 = time.time()
    layout = comp.make_layout(cfg)
    plan = comp.make_data(cfg, layout)
    log(f"[setup] data ready in {time.time() - t0:.1f}s")
    if cfg.inspect_batches:
        return inspect(cfg, plan)
    parts = comp.make_model(cfg, layout)
    meta = comp.run_meta(cfg, layout)
    ckpt = checkpointing.Checkpointer(cfg.checkpoint_dir, cfg.keep_checkpoints)
    frozen = comp.frozen_params(cfg, parts)
    state, data_iter, start = restore_or_init(cfg, parts, plan, ckpt, meta)
    if start == 0:
        sample(
            parts,
            model_lib.merge_params(state["params"], frozen, parts.lora, parts.model.dtype),
            cfg,
            "before",
        )
    loop = Loop(cfg, layout, parts, plan, frozen, ckpt, meta, open_progress(cfg, plan, start, started))
    if start == 0:  # the starting point of a fresh run, on the held-out stories
        base_loss = loop.evaluate_at(0, state)
        model_eval.keep_base(cfg, parts, model_lib.merge_params(state["params"], frozen, parts.lora, parts.model.dtype),
                             base_loss, jax.process_index() == 0)
    code = loop.run(state, data_iter, start, stop)
    evaluated = None
    if code == exit_codes.OK:
        params = model_lib.merge_params(loop.state["params"], frozen, parts.lora, parts.model.dtype)
        out = sample(parts, params, cfg, "after")
        if out is not None:
            loop.writer.text(plan.total_steps, "sample", out)
        if model_eval.wanted(cfg):
            loss = loop.progress.record.get("eval_loss")  # _finish evaluated the last step
            evaluated = model_eval.record(cfg, parts, params, loss, plan.total_steps)
    loop.writer.close()
    if code == exit_codes.OK and cfg.export_hf:
        return export(cfg, evaluated)
    return code


def export(cfg: cli.Config, evaluated: dict | None) -> int:
    """The run's export (process 0 writes it; every process waits for it): exit 78 when it can't be
    done as asked, EXPORT_FAILED when it failed otherwise (the checkpoints are untouched)."""
    from trainers.gemma_jax import export_hf  # pylint: disable=g-import-not-at-top

    try:
        export_hf.export_from_run(cfg.checkpoint_dir, cfg.export_hf, cfg.export_dtype, evaluated)
    except export_hf.ExportError as e:
        raise cli.ConfigError(f"--export_hf={cfg.export_hf}: {e}") from None
    except Exception as e:  # pylint: disable=broad-except  # the export's own exit code
        log(f"[export] failed (the checkpoints are untouched; a restart exports again): {type(e).__name__}: {e}")
        return exit_codes.EXPORT_FAILED
    return exit_codes.OK
