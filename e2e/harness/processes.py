"""The control plane's processes: started in their own process groups, recorded, always stopped.

Every program starts as the leader of a new session (its own process group),
its output in `<state>/logs/<name>.log`, and is written to `<state>/pids` with
its start time (field 22 of /proc/<pid>/stat), so that whoever stops it
(this process at exit or on SIGTERM/SIGINT, `make e2e-down` from another
shell, or the watchdog) kills that group and no other: a pid reused by
another program since has another start time and is left alone.

The watchdog (e2e/harness/watchdog.py) is a process of its own, so the
bound holds even when the harness itself is killed: it stops everything when
the lifetime is over, or as soon as the owning process is gone (unless the
control plane is meant to outlive it, as with `make e2e-up`).
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

STOP_GRACE_SECONDS = 5.0


@dataclass(frozen=True)
class Recorded:
    pid: int
    start_time: str
    name: str


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot, or None if it's gone (or a zombie
    its parent hasn't reaped yet: it runs no more)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces; then state, ...
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else fields[19]


def recorded(state: Path) -> list[Recorded]:
    path = state / "pids"
    if not path.exists():
        return []
    rows = [line.split(maxsplit=2) for line in path.read_text().splitlines() if line.strip()]
    return [Recorded(int(pid), start, name) for pid, start, name in rows]


def alive(entry: Recorded) -> bool:
    return start_time(entry.pid) == entry.start_time


def stop_all(state: Path) -> list[str]:
    """Stop every recorded process group (TERM, then KILL after a grace); the names stopped."""
    entries = [e for e in recorded(state) if alive(e)]
    for entry in reversed(entries):
        _signal_group(entry, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    while any(alive(e) for e in entries) and time.monotonic() < deadline:
        time.sleep(0.1)
    for entry in entries:
        if alive(entry):
            _signal_group(entry, signal.SIGKILL)
    (state / "pids").unlink(missing_ok=True)
    return [e.name for e in entries]


def _signal_group(entry: Recorded, sig: int) -> None:
    try:
        os.killpg(entry.pid, sig)
    except ProcessLookupError:
        pass


class Supervisor:
    """Starts the programs of one control plane and stops them, whatever happens."""

    # Every supervisor of this process with handlers installed: a signal stops them all.
    _active: list[Supervisor] = []

    def __init__(self, state: Path):
        self.state = state
        self.logs = state / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.children: dict[str, subprocess.Popen] = {}
        self._launch: dict[str, tuple[list[str], dict[str, str] | None, Path | None]] = {}
        self._stopped = False

    def install_handlers(self) -> None:
        """Stop everything at interpreter exit and on SIGTERM, SIGINT, SIGHUP."""
        atexit.register(self.stop)
        Supervisor._active.append(self)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, Supervisor._on_signal)

    @staticmethod
    def _on_signal(signum, _frame) -> None:
        for supervisor in list(Supervisor._active):
            supervisor.stop()
        sys.exit(128 + signum)

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None,
              cwd: Path | None = None) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 (the child keeps it open)
        process = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})}, cwd=cwd, start_new_session=True,
        )
        log.close()
        started = start_time(process.pid)
        with open(self.state / "pids", "a") as pids:
            pids.write(f"{process.pid} {started} {name}\n")
        self.children[name] = process
        self._launch[name] = (argv, env, cwd)
        return process

    def kill(self, name: str) -> None:
        """End one program's process group at once (SIGKILL: a crash, no clean shutdown), and wait for it."""
        process = self.children[name]
        entry = Recorded(process.pid, start_time(process.pid) or "", name)
        if entry.start_time:
            _signal_group(entry, signal.SIGKILL)
        process.wait(timeout=STOP_GRACE_SECONDS)

    def restart(self, name: str) -> subprocess.Popen:
        """Start a program again exactly as it was started (same arguments, ports, environment)."""
        argv, env, cwd = self._launch[name]
        return self.start(name, argv, env=env, cwd=cwd)

    def check_running(self) -> None:
        """Raise naming any program that exited, with the end of its log."""
        for name, process in self.children.items():
            if process.poll() is not None:
                raise RuntimeError(f"e2e: {name} exited with {process.returncode}:\n{self.log_tail(name)}")

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.logs / f"{name}.log"
        if not path.exists():
            return "(no log)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self in Supervisor._active:
            Supervisor._active.remove(self)
        stop_all(self.state)
        for process in self.children.values():
            try:
                process.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass


def start_watchdog(state: Path, lifetime_seconds: int, owner_pid: int | None) -> subprocess.Popen:
    """The process that stops the control plane after `lifetime_seconds`, or when `owner_pid` is gone."""
    argv = [sys.executable, "-m", "e2e.harness.watchdog", str(state), str(lifetime_seconds),
            str(owner_pid or 0), start_time(owner_pid) if owner_pid else "-"]
    root = Path(__file__).resolve().parents[2]
    with open(state / "logs" / "watchdog.log", "ab") as log:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=root, start_new_session=True)
