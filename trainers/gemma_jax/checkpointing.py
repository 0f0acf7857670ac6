"""Orbax checkpoints: train state + grain data position + run metadata.

Layout under --checkpoint_dir (one directory per saved step):

    <step>/state/   params, optimizer state and step (Orbax PyTree, OCDBT)
    <step>/data/    process_<i>-of-<n>.json: grain iterator state per process
    <step>/meta/    metadata.json: the settings the data position depends on

Saves are asynchronous (training continues while arrays are written), Orbax
finalizes a step only once every item of every process is written, and only
the last --keep_checkpoints steps are kept. On start, the newest step that
restores cleanly wins: a step that fails to restore (truncated or corrupt
files) is renamed to corrupt-<step>-<time> and the previous one is tried.
"""

from __future__ import annotations

import os
import time

import grain
import jax
from jax.experimental import multihost_utils
import numpy as np
import orbax.checkpoint as ocp

# Settings that define what the data position in a checkpoint means. A
# resume with different values would silently replay or skip data.
DATA_KEYS = (
    "model",
    "maxlen",
    "batch_size",
    "data_shards",
    "datacount",
    "eval_stories",
    "seed",
    "epochs",
    "lora_rank",
    "data_path",
)


class Checkpointer:
    """Thin wrapper around ocp.CheckpointManager for this trainer's items."""

    def __init__(self, directory: str, keep: int):
        self.directory = os.path.abspath(directory) if "://" not in directory else directory
        self._keep = keep
        self._mngr = self._open()

    def _open(self) -> ocp.CheckpointManager:
        options = ocp.CheckpointManagerOptions(
            max_to_keep=self._keep,
            enable_async_checkpointing=True,
            create=True,
            cleanup_tmp_directories=True,
        )
        return ocp.CheckpointManager(self.directory, options=options)

    def all_steps(self) -> list[int]:
        return sorted(self._mngr.all_steps())

    def save(self, step: int, state, data_iter, meta: dict) -> bool:
        """Starts an async save of `step` (no-op if that step already exists)."""
        if step in self._mngr.all_steps():
            return False
        args = ocp.args.Composite(
            state=ocp.args.StandardSave(state),
            data=grain.checkpoint.CheckpointSave(data_iter),
            meta=ocp.args.JsonSave(meta),
        )
        return self._mngr.save(step, args=args, force=True)

    def wait(self) -> None:
        self._mngr.wait_until_finished()

    def close(self) -> None:
        self._mngr.wait_until_finished()
        self._mngr.close()

    def _restore_step(self, step: int, abstract_state, data_iter):
        args = ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract_state),
            data=grain.checkpoint.CheckpointRestore(data_iter),
            meta=ocp.args.JsonRestore(),
        )
        restored = self._mngr.restore(step, args=args)
        return restored["state"], dict(restored["meta"])

    def _all_ok(self, ok: bool) -> bool:
        """Every process must agree, or they would resume from different steps."""
        if jax.process_count() == 1:
            return ok
        flags = multihost_utils.process_allgather(np.asarray([ok], np.int32))
        return bool(np.all(flags))

    def _quarantine(self, step: int) -> None:
        """Moves a broken step aside, so it is neither resumed nor counted."""
        if jax.process_index() == 0:
            src = os.path.join(self.directory, str(step))
            dst = os.path.join(self.directory, f"corrupt-{step}-{int(time.time())}")
            if os.path.exists(src):
                os.rename(src, dst)
                print(f"[checkpoint] step {step} is unreadable; moved to {dst}", flush=True)
        if jax.process_count() > 1:
            multihost_utils.sync_global_devices(f"quarantine-{step}")
        self._mngr.close()
        self._mngr = self._open()

    def restore_latest(self, abstract_state, make_data_iter):
        """Returns (step, state, meta, data_iter) of the newest good checkpoint.

        `make_data_iter()` returns a fresh iterator each try, because a failed
        restore may have left one half-updated. Returns None when there is no
        usable checkpoint.
        """
        for step in sorted(self._mngr.all_steps(), reverse=True):
            data_iter = make_data_iter()
            try:
                state, meta = self._restore_step(step, abstract_state, data_iter)
                ok = True
            except Exception as e:  # pylint: disable=broad-except
                print(
                    f"[checkpoint] restoring step {step} failed: "
                    f"{type(e).__name__}: {str(e)[:300]}",
                    flush=True,
                )
                ok = False
            if self._all_ok(ok):
                return step, state, meta, data_iter
            self._quarantine(step)
        return None


def check_meta(saved: dict, current: dict) -> list[str]:
    """Names the data-defining settings that differ from the checkpoint's."""
    return [
        f"--{k}: checkpoint has {saved.get(k)!r}, now {current.get(k)!r}"
        for k in DATA_KEYS
        if saved.get(k) != current.get(k)
    ]
