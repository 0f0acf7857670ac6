"""The trainers' and the e2e suites' xdist scheduling (tests/support/xdist_order.py): units out longest first,
and no unit given to a worker that holds more than `prefetch` tests not yet done."""

from __future__ import annotations

from types import SimpleNamespace

from tests.support import xdist_order


class _Node(SimpleNamespace):
    __hash__ = object.__hash__

    def send_runtest_some(self, indices):
        self.sent.extend(indices)

    def shutdown(self):
        self.shutting_down = True


def _scheduling(prefetch: int, units: dict[str, int]):
    class Scheduling(xdist_order.LongestFirstScheduling):
        unit_seconds = {"long.py": 600, "mid.py": 100}
        default_test_seconds = 2

    Scheduling.prefetch = prefetch
    scheduling = Scheduling.__new__(Scheduling)  # no pytest config: only the queue and the assignment
    scheduling.workqueue = xdist_order._LongestFirst(scheduling.seconds_of)  # pylint: disable=protected-access
    scheduling.assigned_work, collection = {}, []
    for unit, tests in units.items():
        ids = [f"{unit}::test_{n}" for n in range(tests)]
        scheduling.workqueue[unit] = dict.fromkeys(ids, False)
        collection += ids
    node = _Node(sent=[], shutting_down=False)
    scheduling.registered_collections = {node: collection}
    return scheduling, node


def test_units_go_out_longest_first_by_their_measured_seconds_else_by_their_tests():
    scheduling, _ = _scheduling(2, {"many.py": 40, "mid.py": 3, "long.py": 3, "few.py": 2})
    order = [scheduling.workqueue.popitem(last=False)[0] for _ in range(4)]
    assert order == ["long.py", "mid.py", "many.py", "few.py"]  # many.py: 40 tests of 2 s


def test_a_worker_gets_another_unit_only_with_prefetch_tests_or_fewer_left():
    scheduling, node = _scheduling(1, {"long.py": 3, "mid.py": 3, "few.py": 1})
    scheduling._assign_work_unit(node)  # pylint: disable=protected-access
    assert scheduling.assigned_work[node].keys() == {"long.py"}
    scheduling._reschedule(node)  # pylint: disable=protected-access  # 3 tests left: nothing more
    assert scheduling.assigned_work[node].keys() == {"long.py"}
    scheduling.assigned_work[node]["long.py"]["long.py::test_0"] = True
    scheduling._reschedule(node)  # pylint: disable=protected-access  # 2 left (one running): nothing queued behind
    assert scheduling.assigned_work[node].keys() == {"long.py"}
    scheduling.assigned_work[node]["long.py"]["long.py::test_1"] = True
    scheduling._reschedule(node)  # pylint: disable=protected-access
    assert scheduling.assigned_work[node].keys() == {"long.py", "mid.py"}  # its last test: the next unit
    assert len(node.sent) == 6  # the tests sent to the worker: long.py's 3, then mid.py's 3
    xdist_default, node = _scheduling(2, {"long.py": 3, "mid.py": 3})
    xdist_default._assign_work_unit(node)  # pylint: disable=protected-access
    xdist_default.assigned_work[node]["long.py"]["long.py::test_0"] = True
    xdist_default._reschedule(node)  # pylint: disable=protected-access
    assert xdist_default.assigned_work[node].keys() == {"long.py", "mid.py"}  # xdist's 2: queued behind it
