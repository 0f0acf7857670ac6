"""What one case of the scale benchmark (bench/scale.py) declares: a shipped stack with its pool and runs made
the case's size, as a user would write it, and the control plane's programs with the flags the case runs.

Two shapes:
- `v6e-16x16`: the shipped `tpu-multislice` stack with its pool made `slices` slices of TPU v6e 16x16
  (64 ct6e-standard-4t VMs each) and one multislice run on it: `slices` x 64 pods placed exclusively,
  one node pool per slice (JobSet's exclusive topology);
- `a4`: the shipped `a4` stack with its pool made `slices` A4 VMs (a4-highgpu-8g, 8 B200 each) and as
  many one-VM runs on it (A4 runs are single-VM: `slices` is the shape's count of VMs and runs).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from bench.scale_placement import node_selector_strategy
from e2e.harness.stack_objects import StackObjects, stack_objects

TPU_SHAPE, A4_SHAPE = "v6e-16x16", "a4"
STACKS = {TPU_SHAPE: "tpu-multislice", A4_SHAPE: "a4"}
POOL = "v6e-16x16"
RUN = "multislice"
TOPOLOGY = "16x16"
LEASE_SECONDS = 600  # Case.extra_args says why
MONITOR_GRACE_SECONDS = 900
# The controller-manager's and scheduler's client rates when the case sets none (k8s.io/kubernetes v1.35.4
# pkg/controller/apis/config/v1alpha1/defaults.go: 20 qps, burst 30; pkg/scheduler/apis/config/v1/defaults.go:
# 50 qps, burst 100), and the Job controller's concurrent syncs (pkg/controller/job/config/v1alpha1/defaults.go
# ConcurrentJobSyncs: 5).
DEFAULT_RATES = {"kube-controller-manager": (20.0, 30), "kube-scheduler": (50.0, 100)}
DEFAULT_JOB_SYNCS = 5


@dataclass(frozen=True)
class Case:
    slices: int
    strategy: str  # "affinity" | "node-selector" (TPU only; A4 runs have no exclusive placement)
    kueue: bool
    rep: int = 0
    api_qps: int = 0  # the controller-manager's and scheduler's client rate; 0: their defaults
    shape: str = TPU_SHAPE
    job_syncs: int = 0  # the controller-manager's --concurrent-job-syncs; 0: its default

    def label(self) -> str:
        return (f"{self.shape}-{self.slices}-{self.strategy}-{'kueue' if self.kueue else 'direct'}"
                f"-qps{self.api_qps or 'default'}-syncs{self.job_syncs or 'default'}-{self.rep}")

    def runs(self) -> list[str]:
        return [RUN] if self.shape == TPU_SHAPE else [f"a4-{i}" for i in range(self.slices)]

    def extra_args(self) -> dict[str, list[str]]:
        """The client rates Kubernetes' own 5,000-node validation ran the controller-manager and the
        scheduler with, where the case asks (`--kube-api-qps=100 --kube-api-burst=100`, sig-release's
        scalability validation report for release 1.9)."""
        # kwok logs every lease it renews at INFO (400 lines a second at 4,096 nodes). Its leases are
        # renewed every 150 s instead of a kubelet's 10 s (kwok renews at a quarter of the duration),
        # and the node lifecycle controller waits 900 s instead of 50 s for one: on 2 shared cores,
        # 4,096 kubelets' 410 lease writes a second left a quarter of the nodes NotReady before the
        # run began (tainted, so unschedulable), which a GKE control plane sized for them does not.
        kwok = ["--v=WARN", f"--node-lease-duration-seconds={LEASE_SECONDS}"]
        kcm = [f"--node-monitor-grace-period={MONITOR_GRACE_SECONDS}s"]
        scheduler = []
        if self.api_qps:
            rate = [f"--kube-api-qps={self.api_qps}", f"--kube-api-burst={self.api_qps}"]
            kcm, scheduler = kcm + rate, rate
        if self.job_syncs:
            kcm.append(f"--concurrent-job-syncs={self.job_syncs}")
        return {"kwok": kwok, "kube-controller-manager": kcm, "kube-scheduler": scheduler}


def overrides(case: Case) -> dict:
    """The stack keys a user changes: the pool's shape and size, and the runs (a priority: through Kueue)."""
    if case.shape == A4_SHAPE:
        pool = {"name": "a4", "accelerator": "nvidia-b200", "capacity": "spot",
                "autoscaling": {"minNodes": 0, "maxNodes": case.slices}}
        runs = [{"name": name, "trainer": "trl-gpu", "pool": "a4", "data": "text-to-sql"} for name in case.runs()]
    else:
        pool = {"name": POOL, "accelerator": "tpu-v6e", "topology": TOPOLOGY, "machineType": "ct6e-standard-4t",
                "slices": case.slices, "capacity": "spot"}
        runs = [{"name": RUN, "trainer": "gemma-jax", "pool": POOL, "data": "tinystories",
                 "args": ["--maxlen", "256", "--batch_size", "64"]}]
    if case.kueue:
        runs = [{**run, "priority": "normal"} for run in runs]
    return {"gke-finetune:pools": [pool], "gke-finetune:runs": runs}


def declare(case: Case) -> StackObjects:
    """The program's objects for the case; with the node-selector strategy given to them (bench/scale_placement.py)."""
    objects = stack_objects(STACKS[case.shape], overrides_json=json.dumps(overrides(case)))
    if case.strategy == "node-selector":
        objects = node_selector_strategy(objects, RUN, POOL, case.slices)
    return objects


def without_runs(objects: StackObjects, runs: list[str]) -> tuple[StackObjects, list[dict]]:
    """The objects to install first, and the runs' JobSets, applied together when the clock starts."""
    jobsets = [s.manifest for s in objects.steps
               if s.manifest and s.manifest["kind"] == "JobSet" and s.manifest["metadata"]["name"] in runs]
    steps = [s for s in objects.steps if not any(s.manifest is j for j in jobsets)]
    return dataclasses.replace(objects, steps=steps), jobsets
