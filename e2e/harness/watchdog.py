"""Stops a control plane when its lifetime is over or its owner is gone (processes.py).

    python -m e2e.harness.watchdog STATE_DIR LIFETIME_SECONDS OWNER_PID OWNER_START_TIME

OWNER_PID 0: no owner (`make e2e-up`), only the lifetime bounds it. The
watchdog also ends once the recorded processes are all gone (stopped by
their owner or `make e2e-down`).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from e2e.harness.processes import Recorded, alive, recorded, stop_all

POLL_SECONDS = 1.0


def watch(state: Path, lifetime: float, owner: Recorded | None) -> str:
    deadline = time.monotonic() + lifetime
    seen_any = False
    while True:
        entries = [e for e in recorded(state) if alive(e)]
        seen_any = seen_any or bool(entries)
        if seen_any and not entries:
            return "every process already stopped"
        if time.monotonic() > deadline:
            return f"lifetime of {lifetime:.0f}s over"
        if owner is not None and not alive(owner):
            return f"owner {owner.pid} gone"
        time.sleep(POLL_SECONDS)


def main(argv: list[str]) -> int:
    state, lifetime, owner_pid, owner_start = Path(argv[0]), float(argv[1]), int(argv[2]), argv[3]
    owner = Recorded(owner_pid, owner_start, "owner") if owner_pid else None
    (state / "watchdog.pid").write_text(str(os.getpid()))
    why = watch(state, lifetime, owner)
    stopped = stop_all(state)
    print(f"watchdog: {why}; stopped {', '.join(stopped) or 'nothing'}", flush=True)
    (state / "watchdog.pid").unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
