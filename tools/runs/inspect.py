"""`make inspect STACK= RUN= [OUT=<dir>]`: one folder with what a person debugging the run needs.

    <out>/<stack>-<run>-<UTC time>/
      README.txt               what each file is, the run's phase, its console and Cloud Logging links
      jobset.yaml jobs.yaml pods.yaml           the run's objects as the API server has them (conditions included)
      workload.yaml provisioningrequests.yaml   Kueue's Workload and its ProvisioningRequests (queued runs)
      events.yaml              the namespace's events about any of those objects, oldest first
      nodes.yaml               the nodes the run's pods are on: conditions, taints, labels, allocatable
      logs/<pod>.<container>.log   the last LOG_LINES lines of each container of each pod
      progress.json            the run's progress record (checkpoints/<stack>/<run>/progress.json), or progress.txt: why none
      declared.yaml            the JobSet the stack file declares (tools/render.py; images as the offline plan has them)

Secrets are taken out of every object and log line first (tools/runs/redact.py). Nothing is changed
in the cluster.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import yaml

from tools.runs import pods as podfacts
from tools.runs.cluster import Gone
from tools.runs.redact import redact, redact_text
from tools.status.sources import owned_by

LOG_LINES = 200
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"


class InspectSource(Protocol):
    def jobset(self, run: str) -> dict | None: ...
    def jobs(self, run: str) -> list[dict]: ...
    def pods(self, run: str) -> list[dict]: ...
    def snapshot(self) -> dict[str, list]: ...
    def events(self) -> list[dict]: ...
    def full_nodes(self, names: set[str]) -> list[dict]: ...
    def log(self, pod: str, container: str, tail: int | None = None) -> str: ...


def _dump(path: Path, value) -> None:
    path.write_text(yaml.safe_dump(redact(value), sort_keys=False, width=120))


def _names(objects: Sequence[Mapping]) -> set[tuple[str, str]]:
    return {(o.get("kind", ""), (o.get("metadata") or {}).get("name", "")) for o in objects}


def run_events(events: Sequence[Mapping], about: set[tuple[str, str]]) -> list[Mapping]:
    """The events whose object is one of `about` ((kind, name) pairs), oldest first."""
    def when(e: Mapping) -> str:
        return e.get("lastTimestamp") or e.get("eventTime") or (e.get("metadata") or {}).get("creationTimestamp") or ""

    picked = [e for e in events if ((e.get("involvedObject") or {}).get("kind"),
                                    (e.get("involvedObject") or {}).get("name")) in about]
    return sorted(picked, key=when)


def node_summary(node: Mapping) -> dict:
    status, spec = node.get("status") or {}, node.get("spec") or {}
    return {"name": (node.get("metadata") or {}).get("name"), "labels": (node.get("metadata") or {}).get("labels"),
            "taints": spec.get("taints") or [], "unschedulable": bool(spec.get("unschedulable")),
            "conditions": status.get("conditions") or [], "allocatable": status.get("allocatable") or {}}


def _kinded(objects: Sequence[Mapping], kind: str, api_version: str) -> list[dict]:
    """Objects as a list call returns them lack kind and apiVersion: put them back."""
    return [{"apiVersion": api_version, "kind": kind, **o} for o in objects]


def _pod_logs(source: InspectSource, pods: Sequence[Mapping], logs: Path) -> list[str]:
    notes = []
    for pod in pods:
        containers = [c["name"] for key in ("initContainers", "containers")
                      for c in (pod.get("spec") or {}).get(key) or ()]
        for container in containers:
            try:
                text = source.log(podfacts.name(pod), container, LOG_LINES)
            except Gone as err:
                notes.append(f"{podfacts.name(pod)}/{container}: no log ({err})")
                continue
            except Exception as err:  # pylint: disable=broad-except  # a container not started: say so, go on
                notes.append(f"{podfacts.name(pod)}/{container}: no log ({type(err).__name__}: {err})")
                continue
            (logs / f"{podfacts.name(pod)}.{container}.log").write_text(redact_text(text))
    return notes


def gather(source: InspectSource, stack: str, run: str, folder: Path, status_lines: Sequence[str],
           links: Mapping[str, str], progress: tuple[dict | None, str], declared: Mapping | None) -> Path:
    """Write the folder; returns it."""
    folder.mkdir(parents=True, exist_ok=False)
    (folder / "logs").mkdir()
    jobset = source.jobset(run)
    jobs = _kinded(source.jobs(run), "Job", "batch/v1")
    pods = _kinded(source.pods(run), "Pod", "v1")
    objects = source.snapshot()
    workloads = [w for w in objects.get("workloads", ()) if owned_by(w, "JobSet", run)]
    wl_names = {(w.get("metadata") or {}).get("name") for w in workloads}
    requests = [r for r in objects.get("requests", ()) if any(owned_by(r, "Workload", n) for n in wl_names)]
    files = {"jobset.yaml": jobset, "jobs.yaml": jobs, "pods.yaml": pods}
    if workloads:
        files["workload.yaml"] = workloads
    if requests:
        files["provisioningrequests.yaml"] = requests
    about = _names([*([jobset] if jobset else []), *jobs, *pods, *workloads, *requests])
    files["events.yaml"] = run_events(source.events(), about)
    on = {(p.get("spec") or {}).get("nodeName") for p in pods} - {None, ""}
    files["nodes.yaml"] = [node_summary(n) for n in source.full_nodes(on)]
    if declared is not None:
        files["declared.yaml"] = declared
    for name, value in files.items():
        _dump(folder / name, value)
    notes = _pod_logs(source, pods, folder / "logs")
    record, problem = progress
    if record is not None:
        (folder / "progress.json").write_text(json.dumps(record, indent=1) + "\n")
    else:
        (folder / "progress.txt").write_text((problem or f"no progress record for run {run} yet") + "\n")
    readme = [f"make inspect STACK={stack} RUN={run}, {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}", ""]
    readme += list(status_lines) + [""] + [f"{k:<8} {v}" for k, v in links.items()]
    readme += ["", "files:"] + [f"  {n}" for n in sorted(files)] + ["  logs/ (last %d lines of each container)"
                                                                   % LOG_LINES]
    readme += [f"  {p.name}" for p in folder.glob("progress.*")]
    if jobset is None:
        readme.append("note: the run has no JobSet in the cluster (not submitted, suspended by the stack file, or deleted)")
    readme += [f"note: {n}" for n in notes]
    (folder / "README.txt").write_text(redact_text("\n".join(readme)) + "\n")
    return folder


def folder_name(stack: str, run: str, now: Callable[[], float] = time.time) -> str:
    return f"{stack}-{run}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(now()))}"
