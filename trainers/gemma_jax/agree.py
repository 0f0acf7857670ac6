"""Decisions every process of a multi-host run makes together.

A problem only one host sees (its own data-position file missing, an export
that only process 0 runs) must end every host the same way: if that host
exits alone, the others wait in the next collective (an Orbax barrier, a
train step) until jax.distributed's shutdown barrier times out and the
coordination service aborts them all (rc 134, not the 78 the JobSet's
podFailurePolicy treats as final). So each such point is a collective: every
process contributes a flag, every process learns which processes raised it.
"""

from __future__ import annotations

import jax
from jax.experimental import multihost_utils
import numpy as np


def outcomes(code: int) -> list[int]:
    """Every process's `code`, in process order; every process must call it
    at the same point (a collective: process_allgather over all devices, so
    it also waits for the slowest process to get there).

    process_allgather stacks the processes' inputs along axis 0 in process
    order: it lays jax.devices() out as (process_count, local_device_count)
    (jax/experimental/multihost_utils.py, _handle_array_process_allgather).
    """
    if jax.process_count() == 1:
        return [code]
    codes = multihost_utils.process_allgather(np.asarray([code], np.int32))
    return [int(c) for c in np.asarray(codes).reshape(-1)]


def processes_with(flag: bool) -> list[int]:
    """Indices of the processes whose `flag` is set (a collective, as outcomes)."""
    return [i for i, c in enumerate(outcomes(int(flag))) if c]


def lone_process_options():
    """Orbax multiprocessing options for a restore that only this process
    runs (the Hugging Face export on process 0 of a multi-host run).

    By default an Orbax checkpointer's restore ends in
    multihost.sync_global_processes over every process
    (orbax/checkpoint/_src/checkpointers/checkpointer.py, Checkpointer.restore),
    which a process restoring alone waits in forever. With
    active_processes={this process} the barrier is skipped
    (orbax/checkpoint/_src/multihost/multihost.py, should_skip_process_sync:
    a single active process that is this one), and primary_host must be in
    active_processes (orbax/checkpoint/options.py, MultiprocessingOptions).
    """
    import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top

    me = jax.process_index()
    return ocp.options.MultiprocessingOptions(primary_host=me, active_processes={me})
