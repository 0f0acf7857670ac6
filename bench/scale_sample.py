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


def machine_busy_seconds() -> float:
    """CPU seconds every process of the machine has spent busy since boot, all cores together: the first
    line of /proc/stat less its idle and iowait fields (proc(5))."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / TICKS  # user..steal, less idle and iowait


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
    # The whole machine over the same span: CPU seconds busy (every process, ours and the other users'),
    # the span's seconds, and the highest 1-minute load average seen.
    machine_busy_s: float = 0.0
    seconds: float = 0.0
    peak_load: float = 0.0
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
        started, busy = time.monotonic(), machine_busy_seconds()
        while not self._stop.wait(self.interval):
            self.machine_busy_s, self.seconds = machine_busy_seconds() - busy, time.monotonic() - started
            self.peak_load = max(self.peak_load, load_average()[0])
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
