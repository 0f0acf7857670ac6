"""One real control plane per stack (e2e/harness/session.py), shared by that stack's tests (settings.py)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
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
from e2e.tests.reports import Report, print_report, start_session

SCENARIO_STACK = "tpu-queued"

REPORT = Report("stacks")


@dataclass
class StackRun:
    stack: str
    cp: ControlPlane
    kube: Kube
    objects: StackObjects
    installed: Installed


@pytest.fixture(scope="session")
def state_root(request) -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="gke-finetune-e2e-"))
    yield root
    # Kept when a test of this process failed (the programs' logs and state are what one debugs with);
    # removed otherwise: each control plane's etcd, logs and Pulumi state take hundreds of MB.
    if request.session.testsfailed == 0:
        shutil.rmtree(root, ignore_errors=True)


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


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` (make e2e's) over this suite's units of work (scheduling.py)."""
    if config.getvalue("dist") == "loadfile":
        from e2e.tests.scheduling import PlaneScheduling

        return PlaneScheduling(config, log)
    return None


def pytest_configure(config):
    # Before any worker starts: every process of the session writes its report lines there.
    start_session()


def pytest_terminal_summary(terminalreporter):
    print_report(terminalreporter)
