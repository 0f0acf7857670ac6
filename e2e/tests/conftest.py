"""One real control plane per stack (module docstring of e2e/harness/session.py), shared by that stack's tests.

    E2E_STACKS=dev,a4     the stacks to run (default: every shipped stack, tools/offline.py)
    E2E_ADMISSION=off     run the program without admission/ (the real control plane judges alone)
    E2E_LIFETIME=1800     seconds after which the watchdog stops whatever is still running
"""

from __future__ import annotations

import os
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
from tools.offline import SHIPPED_STACKS

STACKS = tuple(s for s in os.environ.get("E2E_STACKS", ",".join(SHIPPED_STACKS)).split(",") if s)
ADMISSION = os.environ.get("E2E_ADMISSION", "on") != "off"
LIFETIME = int(os.environ.get("E2E_LIFETIME", "1800"))
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


def pytest_terminal_summary(terminalreporter):
    if REPORT:
        terminalreporter.section("e2e: what the API server shows, per stack")
        for line in REPORT:
            terminalreporter.write_line(line)
