"""A synthetic stack per rule class is rejected by the plan, naming the run, the rule and the source."""

import pytest

from stack.problems import ConfigError
from tests.support.pulumi_harness import EXISTING_CLUSTER_STACKS, SHIPPED_STACKS, declared_before_error, run_stack
from tools.plan.collect import PlanError, collect

TPU_POOL = {"name": "v6e-1x1", "accelerator": "tpu-v6e", "topology": "1x1", "zones": ["us-east5-b"]}


@pytest.mark.parametrize("stack", [*SHIPPED_STACKS, *EXISTING_CLUSTER_STACKS])
def test_every_shipped_stack_is_admitted(stack):
    assert run_stack(stack).of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")


@pytest.mark.parametrize("overrides, expected", [
    # fit: a 30 GB boot disk leaves 6.8Gi, under the pod's 15Gi (scratch + FUSE sidecar).
    ({"gke-finetune:pools": [{**TPU_POOL, "bootDiskGb": 30}]},
     "runs[0]: 'gemma3-single-host' would be refused by GKE (fit): "
     "spec.replicatedJobs[0].template.spec.template.requests.ephemeral-storage: 15.0Gi requested, "
     "more than the node's 6.8Gi allocatable (https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes)"),
    # node pool: a multi-host slice cannot scale to 3 of its 2 VMs.
    ({"gke-finetune:pools": [{"name": "v6e-1x1", "accelerator": "tpu-v6e", "topology": "2x4",
                              "machineType": "ct6e-standard-4t", "zones": ["us-east5-b"],
                              "autoscaling": {"maxNodes": 3}}]},
     "pools[0].autoscaling: '0..3' nodes for tpu-v6e 2x4 on 2x ct6e-standard-4t; allowed: minNodes 0 or 2, maxNodes 2"),
    # Autopilot: multislice needs host networking.
    ({"gke-finetune:mode": "autopilot", "gke-finetune:pools": [],
      "gke-finetune:shapes": [{"name": "v6e-1x1", "accelerator": "tpu-v6e", "topology": "2x4",
                               "machineType": "ct6e-standard-4t", "slices": 2}]},
     "shapes[0].slices: 2 needs host networking for multislice, which Autopilot refuses"),
    # syntax: a run name whose pod hostnames exceed a DNS label.
    ({"gke-finetune:runs": [{"name": "r" * 60, "trainer": "gemma-jax", "pool": "v6e-1x1", "data": "tinystories"}]},
     f"runs[0].name: '{'r' * 60}' is too long for pool 'v6e-1x1'"),
])  # fmt: skip
def test_the_plan_rejects_each_rule_class_before_declaring_anything(overrides, expected):
    declared, err = declared_before_error("dev", overrides=overrides)
    assert isinstance(err, ConfigError), err
    assert declared.resources == []
    assert any(p.startswith(expected) for p in err.problems), err.problems
    with pytest.raises(PlanError) as planned:
        _collect_with("dev", overrides)
    assert any(p.startswith(expected) for p in planned.value.problems)


def _collect_with(stack, overrides):
    """The offline plan of a stack with changed keys (what `make plan` prints for such a stack file)."""
    from unittest import mock

    from tools import offline

    real = offline.run_stack
    with mock.patch.object(offline, "run_stack", lambda s, **kw: real(s, **{**kw, "overrides": overrides})):
        return collect(stack)


def test_an_existing_clusters_pool_is_admitted_by_the_same_fit_rules():
    pool = {"name": "v6e-1x1", "accelerator": "tpu-v6e", "topology": "1x1", "nodePool": "tpu-v6e-1x1",
            "bootDiskGb": 30}
    declared, err = declared_before_error("existing-dev", overrides={"gke-finetune:pools": [pool]})
    assert isinstance(err, ConfigError) and declared.resources == []
    assert "ephemeral-storage: 15.0Gi requested, more than the node's 6.8Gi allocatable" in str(err)
