"""The e2e's report: what the tests saw, printed after them in sections (`make e2e`'s output).

A test adds lines to a section's `Report` as it goes. The lines are kept in
files as well as in memory, so that when the tests run in several worker
processes (pytest-xdist, as `make e2e` runs them) the report printed at the
end holds every worker's lines: the controller process reads the files of its
session's directory (E2E_REPORT_DIR, which the workers inherit).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

DIR_ENV = "E2E_REPORT_DIR"
# Printed in this order, each under its title; a multi-line entry prints line by line.
SECTIONS = {
    "status": "e2e: make status against the control plane, as the phases went by",
    "run-commands": "e2e: a run's commands against the control plane (logs served by kwok)",
    "engine": "e2e: existing-cluster stacks through the Pulumi CLI, wall time per step",
    "shared": "e2e: one cluster shared by two teams' stacks, through pulumi",
    "namespace policy": "e2e: PodSecurity, ResourceQuota and LimitRange of the real API server, against the model",
    "handoff": "e2e: make handoff's RBAC for a user who holds nothing else, through pulumi and make doctor",
    "images": "e2e: the trainer images built, pushed, delivered and run (docker-build provider)",
    "faults": "e2e: the controllers under faults",
    "stacks": "e2e: what the API server shows, per stack",
}


def start_session() -> Path:
    """The directory this session's report lines go to (made once, by the first process that asks)."""
    if not os.environ.get(DIR_ENV):
        os.environ[DIR_ENV] = tempfile.mkdtemp(prefix="gke-finetune-e2e-report-")
    return Path(os.environ[DIR_ENV])


class Report(list):
    """One section's entries: a list, whose entries are also written to this process's file."""

    def __init__(self, section: str):
        super().__init__()
        if section not in SECTIONS:
            raise ValueError(f"e2e report: no section {section!r}; sections: {list(SECTIONS)}")
        self.section = section

    def append(self, entry: str) -> None:
        super().append(entry)
        _write(self.section, [entry])

    def extend(self, entries) -> None:
        entries = list(entries)
        super().extend(entries)
        _write(self.section, entries)


def _write(section: str, entries: list[str]) -> None:
    path = start_session() / f"{os.getpid()}.jsonl"
    with path.open("a") as out:
        for entry in entries:
            out.write(json.dumps({"section": section, "entry": entry}) + "\n")


def collected() -> dict[str, list[str]]:
    """Every process's entries by section, each process's in the order it wrote them."""
    found: dict[str, list[str]] = {section: [] for section in SECTIONS}
    directory = start_session()
    for path in sorted(directory.glob("*.jsonl"), key=lambda p: p.stat().st_mtime):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            found[record["section"]].append(record["entry"])
    return found


def print_report(terminalreporter) -> None:
    for section, entries in collected().items():
        if not entries:
            continue
        terminalreporter.section(SECTIONS[section])
        for entry in entries:
            for line in entry.splitlines():
                terminalreporter.write_line(line)
            if section == "status":
                terminalreporter.write_line("")
