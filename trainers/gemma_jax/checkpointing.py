"""Orbax checkpoints: train state + grain data position + run metadata.

Layout under --checkpoint_dir (one directory per saved step):

    <step>/state/   params, optimizer state and step (Orbax PyTree, OCDBT)
    <step>/data/    process_<i>-of-<n>.json: grain iterator state per process
    <step>/meta/    metadata.json: the settings the data position depends on

Saves are asynchronous (training continues while arrays are written), Orbax
finalizes a step only once every item of every process is written, and only
the last --keep_checkpoints steps are kept. On start, the newest step that
restores cleanly wins: a step that fails to restore (truncated or corrupt
files) is renamed to corrupt-<step>-<time> and the previous one is tried;
a step written with other settings is a configuration error, and a
directory whose steps all fail never silently restarts from step 0.
"""

from __future__ import annotations

import os
import time

import grain
import jax
from jax.experimental import multihost_utils
import orbax.checkpoint as ocp

from trainers.gemma_jax import agree

# Settings a checkpoint depends on: what its data position means (a resume
# with other values would silently replay or skip data) and what its state
# tree is (model, LoRA rank, number of processes; for LoRA, the base model
# the adapters belong to).
RUN_KEYS = (
    "process_count",
    "base",
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
    "data_format",
    "columns",
    "prompt_template",
    "system_prompt",
    "loss_on",
    "chat_template",
    "data_mix",
)
# What a checkpoint written before a key was recorded ran with.
RUN_KEY_DEFAULTS = {"data_format": "text", "columns": "", "prompt_template": None, "system_prompt": None,
                    "loss_on": "completion", "chat_template": None, "data_mix": None}


class Checkpointer:
    """Thin wrapper around ocp.CheckpointManager for this trainer's items."""

    def __init__(self, directory: str, keep: int):
        self.directory = os.path.abspath(directory) if "://" not in directory else directory
        self._keep = keep
        self._mngr = self._open()
        # The step whose async write is under way, and the newest known to be written whole: confirmed when
        # orbax waits for it (the next save, `wait`, `close`), so it may trail a finished write by one save,
        # never lead it. A restart resumes from it or a later one; the progress record reports it.
        self._writing: int | None = None
        self.durable_step: int | None = None

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
        started = self._mngr.save(step, args=args, force=True)
        # CheckpointManager.save waits for the previous async save to finish before it starts this
        # one (orbax-checkpoint 0.12.8, checkpoint_manager.py `save`: "Wait for ongoing saves to
        # complete"; with force=True no early return skips that wait), so the step written before is whole
        # on storage now.
        self._settled()
        if started:
            self._writing = step
        return started

    def _settled(self) -> None:
        if self._writing is not None:
            self.durable_step, self._writing = self._writing, None

    def wait(self) -> None:
        self._mngr.wait_until_finished()
        self._settled()

    def close(self) -> None:
        self.wait()
        self._mngr.close()

    def _restore_step(self, step: int, abstract_state, data_iter):
        args = ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract_state),
            data=grain.checkpoint.CheckpointRestore(data_iter),
        )
        return self._mngr.restore(step, args=args)["state"]

    def read_meta(self, step: int) -> dict:
        restored = self._mngr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
        return dict(restored["meta"])

    def _all_ok(self, ok: bool) -> bool:
        """Every process must agree, or they would resume from different steps."""
        return not agree.processes_with(not ok)

    def _quarantine(self, step: int) -> None:
        """Moves a corrupt step aside, so it is neither resumed nor counted."""
        if jax.process_index() == 0:
            src = os.path.join(self.directory, str(step))
            dst = os.path.join(self.directory, f"{QUARANTINE_PREFIX}{step}-{int(time.time())}")
            if os.path.exists(src):
                os.rename(src, dst)
                print(f"[checkpoint] step {step} is corrupt; moved to {dst}", flush=True)
        if jax.process_count() > 1:
            multihost_utils.sync_global_devices(f"quarantine-{step}")
        self._mngr.close()
        self._mngr = self._open()

    def quarantined(self) -> list[str]:
        if "://" in self.directory or not os.path.isdir(self.directory):
            return []
        return sorted(n for n in os.listdir(self.directory) if n.startswith(QUARANTINE_PREFIX))

    def check_compatible(self, step: int, abstract_state, current_meta: dict) -> None:
        """Raises RestoreMismatch when `step` was written by a run with other
        settings: recorded settings first, then the tree and shapes of the
        saved state, then this process's data position file."""
        diffs = check_meta(self.read_meta(step), current_meta)
        diffs += tree_mismatches(self.saved_tree(step), abstract_state)
        data_file = os.path.join(
            self.directory,
            str(step),
            "data",
            f"process_{jax.process_index()}-of-{jax.process_count()}.json",
        )
        if "://" not in self.directory and not os.path.exists(data_file):
            diffs.append(f"no data position for this process ({data_file})")
        if diffs:
            raise RestoreMismatch(f"step {step} in {self.directory}: " + "; ".join(diffs))

    def _check_compatible_everywhere(self, step: int, abstract_state, current_meta: dict) -> None:
        """check_compatible, decided by all processes together: when any of
        them finds `step` incompatible (its own data position missing, say),
        every process raises RestoreMismatch (exit 78 everywhere) instead of
        that one exiting alone while the others wait in Orbax's restore
        barrier until jax.distributed's shutdown aborts them all (agree.py)."""
        problem = None
        try:
            self.check_compatible(step, abstract_state, current_meta)
        except RestoreMismatch as e:
            problem = e
            print(f"[checkpoint] process {jax.process_index()}: {e}", flush=True)
        found = agree.processes_with(problem is not None)
        if problem is not None:
            raise problem
        if found:
            raise RestoreMismatch(
                f"step {step} in {self.directory}: process(es) {found} found it written with "
                "other settings (their logs say what differs)"
            )

    def saved_tree(self, step: int):
        path = os.path.join(self.directory, str(step), "state")
        with ocp.StandardCheckpointer() as ckptr:
            return ckptr.metadata(path).item_metadata.tree

    def restore_latest(self, abstract_state, make_data_iter, current_meta: dict):
        """(step, state, data_iter) of the newest step that restores, or None
        when the directory holds no step at all.

        A step written with other settings raises RestoreMismatch (retrying
        cannot help). Only a step whose files fail to read is moved aside, and
        the previous one tried; a read error that is not about the files'
        contents (OSError: a FUSE or network hiccup) propagates, so the pod
        restarts and tries again. When steps existed but none restores, this
        raises instead of starting over.
        """
        steps = sorted(self._mngr.all_steps(), reverse=True)
        if not steps:
            if self.quarantined():
                raise NoUsableCheckpoint(
                    f"{self.directory} holds only quarantined steps {self.quarantined()}; "
                    "move them back or use a new --checkpoint_dir"
                )
            return None
        for step in steps:
            self._check_compatible_everywhere(step, abstract_state, current_meta)
            data_iter = make_data_iter()  # fresh: a failed try may leave it half-set
            try:
                state = self._restore_step(step, abstract_state, data_iter)
                ok = True
            except OSError:
                raise
            except Exception as e:  # pylint: disable=broad-except
                print(
                    f"[checkpoint] restoring step {step} failed: "
                    f"{type(e).__name__}: {str(e)[:300]}",
                    flush=True,
                )
                ok = False
            if self._all_ok(ok):
                return step, state, data_iter
            self._quarantine(step)
        raise NoUsableCheckpoint(f"no step of {steps} in {self.directory} restores")


class RestoreMismatch(Exception):
    """The checkpoint was written by a run with other settings."""


class NoUsableCheckpoint(Exception):
    """Steps exist but none restores: never silently start over."""


QUARANTINE_PREFIX = "corrupt-"


def check_meta(saved: dict, current: dict) -> list[str]:
    """Names the recorded settings that differ from the checkpoint's."""
    return [
        f"--{k}: checkpoint has {saved.get(k, RUN_KEY_DEFAULTS.get(k))!r}, now {current.get(k)!r}"
        for k in RUN_KEYS
        if saved.get(k, RUN_KEY_DEFAULTS.get(k)) != current.get(k)
    ]


def _leaf_paths(tree) -> dict[str, object]:
    """'a/0/mu/...' -> leaf; Orbax's metadata spells tuples and namedtuples as
    containers keyed by index or field name, so only the names are compared."""
    out = {}
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        names = [str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))) for k in path]
        out["/".join(names)] = leaf
    return out


def tree_mismatches(saved_tree, abstract_state) -> list[str]:
    """Leaves missing, extra or of another shape than this run's state."""
    saved, wanted = _leaf_paths(saved_tree), _leaf_paths(abstract_state)
    out = [f"{k}: not in the checkpoint" for k in sorted(wanted.keys() - saved.keys())]
    out += [f"{k}: in the checkpoint only" for k in sorted(saved.keys() - wanted.keys())]
    for k in sorted(wanted.keys() & saved.keys()):
        if tuple(saved[k].shape) != tuple(wanted[k].shape):
            out.append(f"{k}: checkpoint shape {tuple(saved[k].shape)}, now {wanted[k].shape}")
    if len(out) > 6:
        out = out[:6] + [f"... {len(out) - 6} more"]
    return out
