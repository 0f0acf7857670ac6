"""The run commands (tools/runs/) as a user runs them against the control plane: one-shot, or followed in
the background while the test changes the cluster; and the pods' logs kwok serves (e2e/harness/pod_logs.py)."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

from e2e.harness.kube import Kube, wait_for
from e2e.harness.pod_logs import serve_log, wait_served, write_lines
from e2e.harness.tools import ROOT
from e2e.tests.reports import Report

COMMAND_TIMEOUT = 120.0
REPORT = Report("run-commands")


def runs_argv(command: str, stack: str, root: Path, *args: str) -> list[str]:
    """The command as `make` runs it: on the stack's own kubeconfig context, whatever context is current."""
    return [sys.executable, "-m", "tools.runs", command, "--stack", stack, "--root", str(root), *args]


def run_tool(command: str, stack: str, root: Path, env: dict, *args: str, report: bool = True) -> subprocess.CompletedProcess:
    """One command, as `make <command>` runs it; its output goes to the e2e report."""
    done = subprocess.run(runs_argv(command, stack, root, *args), cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT)
    if report:
        shown = " ".join(a for a in (command, *args))
        REPORT.append(f"$ make {shown}  (exit {done.returncode})")
        REPORT.extend("  " + line for line in (done.stdout + done.stderr).splitlines() if not _noise(line))
    return done


# What the e2e's own tool builds make the CLI say on every command (e2e/README.md, "The engine"), and its
# progress lines: left out of the report.
NOISE = ("warning: using pulumi-", "is expected to have version", "Diagnostics:", "pulumi:pulumi:Stack (")


def _noise(line: str) -> bool:
    return not line.strip() or line.lstrip().startswith("@ ") or any(n in line for n in NOISE)


class Background:
    """A command left running (logs --follow, wait), its output lines collected as they come."""

    def __init__(self, command: str, stack: str, root: Path, env: dict, *args: str):
        self.title = " ".join((command, *args))
        self.proc = subprocess.Popen(runs_argv(command, stack, root, *args), cwd=ROOT, env=env, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.lines: list[str] = []
        self._new: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._new.put(line.rstrip("\n"))
        self._new.put(None)

    def _take(self, timeout: float) -> bool:
        try:
            line = self._new.get(timeout=timeout)
        except queue.Empty:
            return True
        if line is None:
            return False
        self.lines.append(line)
        return True

    def wait_line(self, text: str, timeout: float = COMMAND_TIMEOUT) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = next((line for line in self.lines if text in line), None)
            if found is not None:
                return found
            if not self._take(0.5) and self.proc.poll() is not None:
                break
        raise AssertionError(f"e2e: `{self.title}` printed no line with {text!r}:\n" + "\n".join(self.lines))

    def finish(self, timeout: float = COMMAND_TIMEOUT) -> int:
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"e2e: `{self.title}` did not end:\n" + "\n".join(self.lines)) from None
        while self._take(0.5):
            pass
        REPORT.append(f"$ make {self.title}  (exit {code})")
        REPORT.extend("  " + line for line in self.lines)
        return code


def serve(kube: Kube, namespace: str, pod: str, logs_dir: Path, lines: list[str]) -> Path:
    """kwok serves `lines` as the pod's trainer log; returns the file (append to it to write more)."""
    path = logs_dir / f"{pod}.log"
    write_lines(path, lines)
    serve_log(kube, namespace, pod, path)
    wait_served(kube, namespace, pod, lines[-1])
    return path


def pods_of(kube: Kube, namespace: str, run: str) -> list[dict]:
    return kube.list("v1", "Pod", namespace, labels=f"jobset.sigs.k8s.io/jobset-name={run}")


def process_pod(kube: Kube, namespace: str, run: str, index: int, hosts: int, not_named: str = "",
                timeout: float = COMMAND_TIMEOUT) -> str:
    """The running pod of process `index` (another than `not_named`), once there is one."""
    def probe() -> str | None:
        for pod in pods_of(kube, namespace, run):
            labels = pod["metadata"]["labels"]
            i = int(labels["jobset.sigs.k8s.io/job-index"]) * hosts + int(labels["batch.kubernetes.io/job-completion-index"])
            running = pod.get("status", {}).get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")
            if i == index and running and pod["metadata"]["name"] != not_named:
                return pod["metadata"]["name"]
        return None

    return wait_for(f"process {index} of {run} running", probe, timeout)
