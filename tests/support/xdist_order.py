"""`--dist loadfile` with its units handed out longest first, so that the workers end together.

pytest-xdist's loadfile gives a worker whole files (units), the files with the most tests first
(pytest-xdist 3.8.0 xdist/scheduler/loadscope.py, `schedule`: the `--loadscope-reorder` default), and
gives a worker another unit once two or fewer of its tests are left (`_reschedule`). A suite whose
longest file has few tests then starts it late, and the units queued behind it wait while the other
worker runs out of work. Here the units go out longest first, by the seconds each took in a measured run
(`unit_seconds`; a unit not listed counts `default_test_seconds` per test): an estimate only orders the
units, nothing is skipped or timed by it. `prefetch` is the most tests a worker may have left when it is
given another unit: xdist's 2 by default; 1 keeps a unit from queueing behind a long test. A worker runs a
test only once it holds the next one (xdist/remote.py, `run_one_test` takes `nextitem`), so 1 is the least
that never leaves a worker waiting.

Every test still runs in its file's order on one worker, with its own fixtures.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping

from xdist.scheduler import LoadFileScheduling


class _LongestFirst(OrderedDict):
    """The scheduler's queue of units (it takes the next with `popitem(last=False)`): the longest unit left."""

    def __init__(self, seconds: Callable[[str, int], float]) -> None:
        super().__init__()
        self._seconds = seconds

    def popitem(self, last: bool = True) -> tuple[str, dict[str, bool]]:
        unit = max(self, key=lambda u: self._seconds(u, len(self[u])))
        return unit, self.pop(unit)


class LongestFirstScheduling(LoadFileScheduling):
    """loadfile's scheduling, the longest unit first (module docstring)."""

    unit_seconds: Mapping[str, float] = {}
    default_test_seconds: float = 8
    prefetch: int = 2

    def __init__(self, config, log=None) -> None:
        super().__init__(config, log)
        self.workqueue = _LongestFirst(self.seconds_of)

    def seconds_of(self, unit: str, tests: int) -> float:
        return self.unit_seconds.get(unit, self.default_test_seconds * tests)

    def _reschedule(self, node) -> None:
        # xdist's own, with `prefetch` for its fixed 2.
        if node.shutting_down:
            return
        if not self.workqueue:
            node.shutdown()
            return
        if self._pending_of(self.assigned_work[node]) > self.prefetch:
            return
        self._assign_work_unit(node)


def files_longest_first(config, log, folder: str, file_seconds: Mapping[str, float], default_test_seconds: float):
    """For a suite's `pytest_xdist_make_scheduler`: under `--dist loadfile`, its files (`folder`/name: seconds)
    longest first with a prefetch of 1, so that no file queues behind a long test; None (xdist's own) otherwise."""
    if config.getvalue("dist") != "loadfile":
        return None

    class FilesLongestFirst(LongestFirstScheduling):
        unit_seconds = {f"{folder}/{name}": seconds for name, seconds in file_seconds.items()}
        prefetch = 1

    FilesLongestFirst.default_test_seconds = default_test_seconds
    return FilesLongestFirst(config, log)
