"""Whatever the harness starts stops: when its owner dies, and when its lifetime is over."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from e2e.harness.processes import Recorded, alive, recorded
from e2e.harness.tools import ROOT

OWNER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from e2e.harness.processes import Supervisor, start_watchdog
    import os
    state = Path(sys.argv[1]); lifetime = int(sys.argv[2]); owned = sys.argv[3] == "owned"
    supervisor = Supervisor(state)
    start_watchdog(state, lifetime, os.getpid() if owned else None)
    supervisor.start("sleeper", ["sleep", "300"])
    print("started", flush=True)
    time.sleep(300)
""")


def _start(state: Path, lifetime: int, owned: bool) -> subprocess.Popen:
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(state), str(lifetime), "owned" if owned else "free"],
                             cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert owner.stdout.readline().strip() == "started"
    return owner


def _wait_gone(entries: list[Recorded], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(alive(e) for e in entries):
            return True
        time.sleep(0.2)
    return False


def test_the_watchdog_stops_the_programs_when_their_owner_is_killed(tmp_path):
    owner = _start(tmp_path, lifetime=600, owned=True)
    [sleeper] = recorded(tmp_path)
    assert alive(sleeper)
    os.kill(owner.pid, signal.SIGKILL)  # no atexit, no handler: only the watchdog is left
    owner.wait()
    assert _wait_gone([sleeper], 10), "the sleeper outlived its owner"


def test_the_watchdog_stops_the_programs_when_the_lifetime_is_over(tmp_path):
    owner = _start(tmp_path, lifetime=2, owned=False)
    [sleeper] = recorded(tmp_path)
    try:
        assert _wait_gone([sleeper], 10), "the sleeper outlived its lifetime"
    finally:
        owner.kill()
        owner.wait()
