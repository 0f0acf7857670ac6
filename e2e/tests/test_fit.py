"""admission/'s fit model against the real scheduler: a pod it refuses stays Pending for the same reason.

The offline rules reject a stack whose run doesn't fit its node
(tests/admission/test_admit_stacks.py: a 30 GB boot disk leaves 6.8Gi of
ephemeral storage under the pod's 15Gi, its GCS FUSE sidecar included);
every shipped stack they accept is placed by the real scheduler
(test_stacks.py). Here the refused stack goes to the control plane with
admission/ off: the scheduler must refuse it too, and say why, with GKE's
FUSE sidecar injected into the pod as on GKE (e2e/harness/fuse_sidecar.py).
"""

from __future__ import annotations

import json

import pytest

from admission import fit
from core import quantity
from core.allocatable import Allocatable
from core.names import POOL_LABEL
from e2e.harness.install import install_stack
from e2e.harness.observe import wait_bound
from e2e.harness.session import control_plane
from e2e.harness.stack_objects import stack_objects
from e2e.tests.scenario import pod_spec, pod_template, refused_by_scheduler, variant
from e2e.tests.settings import LIFETIME
from stack.problems import ConfigError

TPU_POOL = {"name": "v6e-1x1", "accelerator": "tpu-v6e", "topology": "1x1", "zones": ["us-east5-b"]}
SMALL_DISK = {"gke-finetune:pools": [{**TPU_POOL, "bootDiskGb": 30}]}


def test_a_run_admission_refuses_for_its_boot_disk_is_refused_by_the_scheduler(state_root):
    overrides = json.dumps(SMALL_DISK)
    with pytest.raises(ConfigError) as refused:
        stack_objects("dev", overrides_json=overrides)
    assert any("(fit)" in p and "ephemeral-storage" in p for p in refused.value.problems), refused.value.problems
    objects = stack_objects("dev", admission=False, overrides_json=overrides)
    with control_plane(state_root / "dev-small-disk", LIFETIME) as cp:
        kube = cp.client()
        install_stack(cp, kube, objects)
        [run] = objects.manifests("JobSet")
        said = refused_by_scheduler(kube, run)
    assert "Insufficient ephemeral-storage" in said, said


SINGLE_HOST_RUN = "gemma3-single-host"
BIND_WAIT = 60.0


def _node_allocatable(kube, pool: str) -> Allocatable:
    """The allocatable of a node of `pool`, as the API server stores it."""
    node = next(n for n in kube.list("v1", "Node") if n["metadata"]["labels"].get(POOL_LABEL) == pool)
    alloc = node["status"]["allocatable"]
    return Allocatable(cpu=float(quantity.parse(alloc["cpu"])), memory=float(quantity.parse(alloc["memory"])),
                       ephemeral_storage=float(quantity.parse(alloc["ephemeral-storage"])))


def _sidecar_over_disk(jobset: dict, node: Allocatable) -> None:
    """The FUSE sidecar's ephemeral storage 1Gi more than the trainer leaves of the node's disk."""
    pod = pod_template(jobset)
    annotations = pod["metadata"]["annotations"]
    sidecar = fit.fuse_sidecar_requests(annotations)["ephemeral-storage"]
    others = fit.pod_requests(pod)["ephemeral-storage"] - sidecar
    over = str(int(node.ephemeral_storage - others + 2**30))  # request and limit: a limit under its request is invalid
    annotations["gke-gcsfuse/ephemeral-storage-request"] = annotations["gke-gcsfuse/ephemeral-storage-limit"] = over


def _cpu_over(jobset: dict, node: Allocatable) -> None:
    resources = pod_spec(jobset)["containers"][0]["resources"]
    resources["requests"]["cpu"] = resources["limits"]["cpu"] = f"{int(node.cpu * 1000)}m"


def _memory_in_margin(jobset: dict, node: Allocatable) -> None:
    """Trainer memory (request and limit) so that the pod fits the node by 1Gi, inside the model's margin."""
    pod = pod_template(jobset)
    resources = pod["spec"]["containers"][0]["resources"]
    others = fit.pod_requests(pod)["memory"] - float(quantity.parse(resources["requests"]["memory"]))
    resources["requests"]["memory"] = resources["limits"]["memory"] = str(int(node.memory - others - 2**30))


# (case, change, the scheduler binds it). The model refuses every one; where the scheduler binds,
# the model is stricter on purpose: it keeps a 1% memory margin (core/allocatable.py).
CASES = [
    ("sidecar-over-disk", _sidecar_over_disk, False),
    ("cpu-over", _cpu_over, False),
    ("memory-in-margin", _memory_in_margin, True),
]


@pytest.mark.parametrize(("case", "change", "scheduler_binds"), CASES, ids=[c[0] for c in CASES])
def test_the_fit_model_and_the_scheduler_agree_but_where_the_model_is_stricter_on_purpose(
        queued, submitted, case, change, scheduler_binds):
    _, kube, runs = queued
    shipped = runs[SINGLE_HOST_RUN]
    node = _node_allocatable(kube, pod_spec(shipped)["nodeSelector"][POOL_LABEL])
    assert not fit.fit_findings(pod_template(shipped), node, "pod"), "the shipped run must fit"
    run = variant(shipped, f"fit-{case}", lambda j: change(j, node))
    assert fit.fit_findings(pod_template(run), node, "pod"), f"the model accepts {case}"
    submitted(run)
    if scheduler_binds:
        assert wait_bound(kube, run, BIND_WAIT)
    else:
        said = refused_by_scheduler(kube, run)
        assert "Insufficient" in said, said
