"""One real control plane per stack (e2e/harness/session.py), shared by that stack's tests (settings.py)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from e2e.harness.cluster import ControlPlane
from e2e.harness.install import Installed, install_stack
from e2e.harness.kube import Kube
from e2e.harness.observe import admissions, placements, report_lines
from e2e.harness.session import control_plane
from e2e.harness.stack_objects import StackObjects, stack_objects
from e2e.tests.scenario import delete_and_wait
from e2e.tests.settings import ADMISSION, LIFETIME, STACKS

SCENARIO_STACK = "tpu-queued"

REPORT: list[str] = []


@dataclass
class StackRun:
    stack: str
    cp: ControlPlane
    kube: Kube
    objects: StackObjects
    installed: Installed


@pytest.fixture(scope="session")
def state_root() -> Path:
    return Path(tempfile.mkdtemp(prefix="gke-finetune-e2e-"))


@pytest.fixture(scope="module", params=STACKS)
def stack_run(request, state_root):
    stack = request.param
    objects = stack_objects(stack, admission=ADMISSION)
    with control_plane(state_root / stack, LIFETIME) as cp:
        kube = cp.client()
        installed = install_stack(cp, kube, objects)
        run = StackRun(stack, cp, kube, objects, installed)
        yield run
        namespace = objects.runs_namespace
        REPORT.extend(report_lines(stack, installed.applied, installed.left_out, installed.jobs_completed,
                                   placements(kube, namespace), admissions(kube, namespace)))


@pytest.fixture(scope="session")
def queued(state_root):
    """The scenario control plane: the shipped `tpu-queued` stack (Kueue, a queued pool and a
    capacity ladder, a single-host pool outside Kueue), installed, its runs then removed so
    that the tests' variants have the nodes. Yields (control plane, client, runs by name)."""
    objects = stack_objects(SCENARIO_STACK)
    with control_plane(state_root / f"{SCENARIO_STACK}-scenarios", LIFETIME) as cp:
        kube = cp.client()
        install_stack(cp, kube, objects)
        runs = {j["metadata"]["name"]: j for j in objects.manifests("JobSet")}
        for jobset in runs.values():
            delete_and_wait(kube, jobset)
        yield cp, kube, runs


@pytest.fixture
def submitted(queued):
    """Submit a JobSet to the scenario control plane; delete it (and wait for its pods to go) after."""
    _, kube, _ = queued
    made = []

    def submit(jobset: dict) -> dict:
        made.append(jobset)
        kube.apply(jobset)
        return jobset

    yield submit
    for jobset in made:
        delete_and_wait(kube, jobset)


def pytest_report_header(config):
    from e2e.harness.engine import e2e_provider_note

    return [e2e_provider_note()]


def pytest_terminal_summary(terminalreporter):
    from e2e.tests.test_engine import DIFF_REPORT, ENGINE_REPORT, WEBHOOK_REPORT, WRONG_REPORT
    from e2e.tests.test_faults import FAULT_REPORT
    from e2e.tests.test_shared_cluster import SHARED_REPORT
    from e2e.tests.test_status import STATUS_REPORT

    if STATUS_REPORT:
        terminalreporter.section("e2e: make status against the control plane, as the phases went by")
        for table in STATUS_REPORT:
            for line in table.splitlines():
                terminalreporter.write_line(line)
            terminalreporter.write_line("")
    if ENGINE_REPORT or WRONG_REPORT or WEBHOOK_REPORT:
        terminalreporter.section("e2e: existing-cluster stacks through the Pulumi CLI, wall time per step")
        for line in ENGINE_REPORT + DIFF_REPORT + WRONG_REPORT + WEBHOOK_REPORT:
            terminalreporter.write_line(line)
    if FAULT_REPORT:
        terminalreporter.section("e2e: runs under faults, make status before -> after")
        for line in FAULT_REPORT:
            terminalreporter.write_line(line)
    if SHARED_REPORT:
        terminalreporter.section("e2e: one cluster shared by two teams' stacks, through pulumi")
        for line in SHARED_REPORT:
            terminalreporter.write_line(line)
    if REPORT:
        terminalreporter.section("e2e: what the API server shows, per stack")
        for line in REPORT:
            terminalreporter.write_line(line)
