"""CPU and memory of the control plane's programs, sampled from /proc while a run starts.

Each program is the leader of its process group (e2e/harness/processes.py); the
sample is that process's own: utime + stime (fields 14 and 15 of /proc/<pid>/stat,
in clock ticks) and VmRSS from /proc/<pid>/status (proc(5)). CPU is reported as
the busiest interval's rate (cores) and as the total seconds spent over the
measured span; memory as the highest RSS seen.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime: fields 14, 15 of the line


def rss_bytes(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


@dataclass
class Usage:
    peak_cores: float = 0.0
    cpu_s: float = 0.0
    peak_rss_mib: float = 0.0


@dataclass
class Sampler:
    """Samples `pids` (name -> pid) every `interval` seconds between start() and stop()."""

    pids: dict[str, int]
    interval: float = 0.5
    usage: dict[str, Usage] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self.usage = {name: Usage() for name in self.pids}
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> dict[str, Usage]:
        self._stop.set()
        if self._thread:
            self._thread.join()
        return self.usage

    def _run(self) -> None:
        last = {name: (time.monotonic(), cpu_seconds(pid)) for name, pid in self.pids.items()}
        while not self._stop.wait(self.interval):
            for name, pid in self.pids.items():
                now, cpu = time.monotonic(), cpu_seconds(pid)
                before_t, before_cpu = last[name]
                usage = self.usage[name]
                if cpu is not None and before_cpu is not None and now > before_t:
                    usage.cpu_s += cpu - before_cpu
                    usage.peak_cores = max(usage.peak_cores, (cpu - before_cpu) / (now - before_t))
                rss = rss_bytes(pid)
                if rss is not None:
                    usage.peak_rss_mib = max(usage.peak_rss_mib, rss / 2**20)
                last[name] = (now, cpu)


def load_average() -> tuple[float, float, float]:
    return os.getloadavg()
