"""admission/'s fit model against the real scheduler: a pod it refuses stays Pending for the same reason.

The offline rules reject a stack whose run doesn't fit its node
(tests/admission/test_admit_stacks.py: a 30 GB boot disk leaves 6.8Gi of
ephemeral storage under the pod's 15Gi, its GCS FUSE sidecar included);
every shipped stack they accept is placed by the real scheduler
(test_stacks.py). Here the refused stack goes to the control plane with
admission/ off: the scheduler must refuse it too, and say why. The FUSE
sidecar is GKE's webhook's to inject, which this control plane lacks, so
the scheduler sees the trainer's own request alone; it still doesn't fit.
"""

from __future__ import annotations

import json

import pytest

from e2e.harness.install import install_stack
from e2e.harness.observe import wait_bound
from e2e.harness.session import control_plane
from e2e.harness.stack_objects import stack_objects
from e2e.tests.settings import LIFETIME
from stack.problems import ConfigError

TPU_POOL = {"name": "v6e-1x1", "accelerator": "tpu-v6e", "topology": "1x1", "zones": ["us-east5-b"]}
SMALL_DISK = {"gke-finetune:pools": [{**TPU_POOL, "bootDiskGb": 30}]}
UNSCHEDULABLE_WAIT = 20.0


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
        with pytest.raises(TimeoutError) as unscheduled:
            wait_bound(kube, run, UNSCHEDULABLE_WAIT)
    assert "Insufficient ephemeral-storage" in str(unscheduled.value), str(unscheduled.value)
