"""One control plane's life: a state directory, the watchdog, the programs, and their stop.

    with control_plane(state_dir, lifetime=1800) as cp:   # stops it all on leaving
        kube = cp.client()

`keep=True` (make e2e-up) leaves it running after the owner exits, bounded by
the lifetime alone; `stop(state_dir)` (make e2e-down) ends it from any shell.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

from e2e.harness.cluster import ControlPlane
from e2e.harness.processes import Recorded, Supervisor, alive, start_time, start_watchdog, stop_all
from e2e.harness.tools import TOOL_DIRS, tools

DEFAULT_STATE = Path(os.environ.get("E2E_STATE", f"/tmp/gke-finetune-e2e-{os.getuid()}"))


def stop(state: Path) -> list[str]:
    """Stop the control plane recorded in `state` and its watchdog; the names stopped."""
    stopped = stop_all(state) if state.exists() else []
    watchdog = state / "watchdog.pid"
    if watchdog.exists():
        pid = int(watchdog.read_text())
        entry = Recorded(pid, start_time(pid) or "", "watchdog")
        # Only a python process still running the watchdog module is ours to end.
        cmdline = Path(f"/proc/{pid}/cmdline")
        if entry.start_time and cmdline.exists() and b"e2e.harness.watchdog" in cmdline.read_bytes() and alive(entry):
            os.kill(pid, signal.SIGTERM)
            stopped.append("watchdog")
        watchdog.unlink(missing_ok=True)
    return stopped


@contextlib.contextmanager
def control_plane(state: Path, lifetime: int, keep: bool = False, serve_logs: bool = False,
                  tool_names: tuple[str, ...] = TOOL_DIRS,
                  extra_args: dict[str, list[str]] | None = None) -> Iterator[ControlPlane]:
    if state.exists():
        stop(state)
        shutil.rmtree(state)
    state.mkdir(parents=True)
    supervisor = Supervisor(state)
    if not keep:
        supervisor.install_handlers()
    start_watchdog(state, lifetime, None if keep else os.getpid())
    cp = ControlPlane(state, tools(tool_names), supervisor, serve_logs=serve_logs, extra_args=extra_args or {})
    try:
        cp.start()
        yield cp
    except BaseException:
        supervisor.stop()
        raise
    else:
        if not keep:
            supervisor.stop()
