"""How `make e2e` hands the tests to its xdist workers: `--dist loadfile`, with units that fit this suite.

pytest-xdist's loadfile gives a worker whole files, the files with the most tests first
(pytest-xdist 3.8.0 xdist/scheduler/loadscope.py, `schedule`: the `--loadscope-reorder` default). Here
most of a test's time is a control plane's, so that wastes time three ways:

- the files that use the scenario control plane (conftest.py `queued`, a session fixture) build one on
  every worker they land on (about 45 s each): they are one unit, so it is built once;
- a file whose every parameter builds a control plane of its own (a module fixture with params: each
  stack of test_stacks.py, each engine stack of test_engine.py's flow) runs those planes one after the
  other on one worker: each parameter is a unit of its own, which any worker may take;
- a unit of one long test (an engine flow) would be handed out last, after the files with many short
  tests: units go out longest first, by the seconds each took in a measured run (UNIT_SECONDS), so the
  workers end together (tests/support/xdist_order.py, which the trainers' suites use too). An estimate
  only orders the units: nothing is skipped or timed by it.

Every test still runs, in its file's order, with its own fixtures; what a unit shares is only what its
tests shared before (the scenario plane: a session fixture, made per worker).
"""

from __future__ import annotations

from tests.support.xdist_order import LongestFirstScheduling

SCENARIO_UNIT = "e2e/tests: the scenario control plane"
# The files whose tests use conftest.py's `queued` plane.
SCENARIO_FILES = frozenset({"test_behaviour.py", "test_broken.py", "test_fit.py", "test_kueue.py",
                            "test_kueue_eviction.py"})
# file -> the test whose parameters each build their own plane (None: every test of the file).
PLANE_PER_PARAMETER = {"test_stacks.py": None, "test_engine.py": "test_preview_up_noop_replace_add_destroy"}
# Seconds per unit (setups, calls and teardowns), rounded from runs on this machine (2 cores, three workers,
# other work beside them); files grown since are estimates. They only set the order the units are handed
# out in. A unit not listed counts DEFAULT_TEST_SECONDS per test.
UNIT_SECONDS = {
    SCENARIO_UNIT: 215, "e2e/tests/test_faults.py": 110, "e2e/tests/test_status.py": 160,
    "e2e/tests/test_handoff.py": 100, "e2e/tests/test_shared_cluster.py": 100,
    "e2e/tests/test_engine.py[tpu-queued]": 200, "e2e/tests/test_engine.py[a4]": 165,
    "e2e/tests/test_engine.py[tpu-multislice]": 135, "e2e/tests/test_engine.py[dev]": 110,
    "e2e/tests/test_engine.py[tpu-multihost]": 90, "e2e/tests/test_engine.py": 85,
    "e2e/tests/test_namespace_policy.py": 70,
    **{f"e2e/tests/test_stacks.py[{stack}]": 25 for stack in ("a4", "autopilot", "dev", "tpu-multihost",
                                                               "tpu-multislice")},
    "e2e/tests/test_stacks.py[tpu-queued]": 32,
}
DEFAULT_TEST_SECONDS = 8


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to (module docstring)."""
    path, _, test = nodeid.partition("::")
    name = path.rsplit("/", 1)[-1]
    if name in SCENARIO_FILES:
        return SCENARIO_UNIT
    function, bracket, parameter = test.partition("[")
    if bracket and name in PLANE_PER_PARAMETER and PLANE_PER_PARAMETER[name] in (None, function):
        return f"{path}[{parameter}"
    return path


class PlaneScheduling(LongestFirstScheduling):
    """loadfile's scheduling over the units of `unit_of`, the longest first."""

    unit_seconds = UNIT_SECONDS
    default_test_seconds = DEFAULT_TEST_SECONDS

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)
