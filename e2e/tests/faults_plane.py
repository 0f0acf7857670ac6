"""The faults' control plane (test_faults.py): the shipped `tpu-queued` stack with a multislice pool and
run added and more runs on its ladder, declared by the program; what each test looks at.

The stack file a user would write: tpu-queued's pools plus `tpu-multislice`'s (Spot slices of
v6e 2x4, 16 of them here, renamed so as not to clash with tpu-queued's on-demand pool), its runs plus the multislice
run and three copies of the ladder run (one per rung it may hold, and one of high priority).
Everything is installed but the runs, which the tests submit as the program declares them; `make
status` reads the same stack file from a directory of its own, with a progress record per run
written by the JAX trainer's own progress code (a checkpoint at step 40).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import yaml

from core.names import checkpoint_prefix
from e2e.harness.cluster import ControlPlane
from e2e.harness.install import Installed, install_stack
from e2e.harness.kube import Kube, wait_for
from e2e.harness.observe import JOBSET_NAME_LABEL, KUEUE, admissions, expected_pods, placements
from e2e.harness.stack_objects import StackObjects, stack_objects
from e2e.harness.tools import ROOT
from e2e.tests.scenario import JOBSET_API, delete_and_wait
from e2e.tests.settings import ADMISSION
from tools.status.__main__ import main as status_main
from trainers.progress import Progress

STACK = "tpu-queued"
MULTISLICE_POOL = "ms-v6e-2x4"
MULTISLICE_SLICES = 16  # exclusive placement is checked at this size (test_faults.py)
LADDER, MULTISLICE, SECOND, ADMITTING, URGENT = ("gemma3-ladder", "gemma3-multislice", "ladder-b", "ladder-c",
                                                 "ladder-urgent")
TIMEOUT = 120.0
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
# The restart a JobSet's Jobs and pods belong to: JobSet labels them with its status.restarts when it
# creates them, and deletes the Jobs of an earlier attempt (sigs.k8s.io/jobset v0.12.0
# pkg/controllers/jobset_controller.go, labelAndAnnotateObject and getChildJobs).
RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"


def _file(stack: str) -> dict:
    return yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]


def overrides() -> dict:
    """The stack keys changed from tpu-queued's, as a user would write them."""
    queued, multislice = _file(STACK), _file("tpu-multislice")
    pool = {**multislice["gke-finetune:pools"][0], "name": MULTISLICE_POOL, "slices": MULTISLICE_SLICES}
    run = {**multislice["gke-finetune:runs"][0], "pool": MULTISLICE_POOL}
    ladder = next(r for r in queued["gke-finetune:runs"] if r["name"] == LADDER)
    copies = [{**copy.deepcopy(ladder), "name": name} for name in (SECOND, ADMITTING)]
    urgent = {**copy.deepcopy(ladder), "name": URGENT, "priority": "high"}
    return {"gke-finetune:pools": [*queued["gke-finetune:pools"], pool],
            "gke-finetune:runs": [*queued["gke-finetune:runs"], run, *copies, urgent]}


@dataclass
class FaultsPlane:
    cp: ControlPlane
    kube: Kube
    objects: StackObjects
    installed: Installed
    runs: dict[str, dict]  # run -> its JobSet as the program declares it
    status_root: Path
    progress: Path

    @property
    def ns(self) -> str:
        return self.objects.runs_namespace

    def submit(self, run: str) -> dict:
        self.kube.apply(self.runs[run])
        return self.runs[run]

    def remove(self, run: str) -> None:
        delete_and_wait(self.kube, self.runs[run])

    def status(self) -> dict[str, dict]:
        """`make status --json` of the stack, from the cluster and the progress records (its command
        line, run in this process: an interpreter's start-up per look would add seconds to each test)."""
        out, err = io.StringIO(), io.StringIO()
        # The control plane's context by name: status never reads a kubeconfig's current context
        # (tools/status/context.py), and this one's is not named as get-credentials names a GKE cluster's.
        argv = ["show", "--stack", STACK, "--root", str(self.status_root), "--progress-dir", str(self.progress),
                "--context", "e2e", "--json"]
        with mock.patch.dict(os.environ, {"KUBECONFIG": str(self.cp.kubeconfig)}), \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = status_main(argv)
        assert code == 0, err.getvalue()
        return {r["run"]: r for r in json.loads(out.getvalue())}

    def provisioner(self, mode: str) -> None:
        (self.cp.state / "provisioner-mode").write_text(mode)


def _progress_records(directory: Path, runs: list[str]) -> None:
    """Each run's record as the JAX trainer writes it, where the stack's layout puts it (core/names.py):
    40 of 100 steps done, checkpointed at 40."""
    for run in runs:
        started = 1_700_000_000.0
        progress = Progress(str(directory / checkpoint_prefix(STACK, run)), "gemma-jax", total_steps=100, started=started,
                            clock=lambda: started + 600)
        progress.resumed(0)
        progress.first_step(1, loss=3.0)
        progress.trained(40, seconds=400.0, loss=2.5, tokens_per_s=1200.0)
        progress.checkpointed(40)


def build(cp: ControlPlane, state: Path) -> FaultsPlane:
    values = overrides()
    objects = stack_objects(STACK, admission=ADMISSION, overrides_json=json.dumps(values))
    runs = {j["metadata"]["name"]: j for j in objects.manifests("JobSet")}
    platform = dataclasses.replace(objects, steps=[s for s in objects.steps
                                                   if not (s.manifest and s.manifest["kind"] == "JobSet")])
    kube = cp.client()
    installed = install_stack(cp, kube, platform)
    root = state / "status-stack"
    root.mkdir(parents=True)
    shutil.copy(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    (root / f"Pulumi.{STACK}.yaml").write_text(json.dumps({"config": {**_file(STACK), **values}}))
    progress = state / "progress"
    _progress_records(progress, list(runs))
    return FaultsPlane(cp, kube, objects, installed, runs, root, progress)


# --- what the tests look at ------------------------------------------------------------------------
def jobset(plane: FaultsPlane, run: str) -> dict:
    return plane.kube.get(JOBSET_API, "JobSet", run, plane.ns)


def jobs(plane: FaultsPlane, run: str) -> list[dict]:
    return plane.kube.list("batch/v1", "Job", plane.ns, labels=f"{JOBSET_NAME_LABEL}={run}")


def pods(plane: FaultsPlane, run: str) -> list[dict]:
    return plane.kube.list("v1", "Pod", plane.ns, labels=f"{JOBSET_NAME_LABEL}={run}")


def workloads(plane: FaultsPlane, run: str) -> list[dict]:
    return [w for w in plane.kube.list(KUEUE, "Workload", plane.ns)
            if any(o["name"] == run for o in w["metadata"].get("ownerReferences", []))]


def running(plane: FaultsPlane, run: str) -> list[dict] | None:
    """The run's pods when every one it should have is bound and Running (no more, no fewer), all of the
    JobSet's current restart attempt: right after a restart the pods of the Jobs it is deleting still
    run for a moment, and must not count as the run running again."""
    attempt = str(jobset(plane, run).get("status", {}).get("restarts", 0))
    found = [p for p in pods(plane, run) if not p["metadata"].get("deletionTimestamp")]
    want = expected_pods(plane.runs[run])
    ok = len(found) == want and all(p["spec"].get("nodeName") and p["status"].get("phase") == "Running"
                                    and p["metadata"]["labels"].get(RESTART_ATTEMPT_LABEL) == attempt
                                    for p in found)
    return found if ok else None


def wait_running(plane: FaultsPlane, run: str, timeout: float = TIMEOUT) -> list[dict]:
    return wait_for(f"every pod of {run} Running", lambda: running(plane, run), timeout,
                    explain=lambda: f"{placements(plane.kube, plane.ns, run)} {admissions(plane.kube, plane.ns)}")


def no_duplicates(plane: FaultsPlane, run: str) -> None:
    """One Job per slice, one pod per host, one Workload where Kueue admits it; nothing twice."""
    manifest = plane.runs[run]
    slices = sum(int(rj.get("replicas", 1)) for rj in manifest["spec"]["replicatedJobs"])
    found_jobs = [j for j in jobs(plane, run) if not j["metadata"].get("deletionTimestamp")]
    names = [j["metadata"]["name"] for j in found_jobs]
    assert len(names) == len(set(names)) == slices, f"{run}: Jobs {names}, expected {slices}"
    live = [p for p in pods(plane, run) if not p["metadata"].get("deletionTimestamp")]
    hosts = [(p["metadata"]["labels"].get(JOB_INDEX_LABEL),
              p["metadata"]["annotations"].get("batch.kubernetes.io/job-completion-index")) for p in live]
    assert len(hosts) == len(set(hosts)) == expected_pods(manifest), f"{run}: pods per (slice, host) {sorted(hosts)}"
    if "kueue.x-k8s.io/queue-name" in manifest["metadata"].get("labels", {}):
        found = [w["metadata"]["name"] for w in workloads(plane, run)]
        assert len(found) == 1, f"{run}: Workloads {found}"


def uids(found: list[dict]) -> set[str]:
    return {p["metadata"]["uid"] for p in found}
