"""What Autopilot admits: no host network, FUSE sidecar limits that aren't "0", real requests."""

import copy
from pathlib import Path

import pytest

from admission import autopilot
from admission.check import stack_manifests
from core import catalog
from stack import reader
from stack.problems import ConfigError
from tests.support.pulumi_harness import declared_before_error

ROOT = Path(__file__).resolve().parents[2]


def autopilot_pod():
    manifest = stack_manifests(reader.load_files("autopilot", ROOT))["gemma3-single-host"]
    return copy.deepcopy(manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"])


def findings(pod, accelerator=catalog.TPU_V6E):
    return list(autopilot.autopilot_findings(pod, accelerator, "pod"))


def test_the_shipped_autopilot_run_is_admitted():
    assert findings(autopilot_pod()) == []


def test_sidecar_limits_on_autopilot_are_the_requests_not_zero():
    annotations = autopilot_pod()["metadata"]["annotations"]
    for resource in ("cpu", "memory", "ephemeral-storage"):
        assert annotations[f"gke-gcsfuse/{resource}-limit"] == annotations[f"gke-gcsfuse/{resource}-request"] != "0"


def test_host_network_is_refused():
    pod = autopilot_pod()
    pod["spec"]["hostNetwork"] = True
    [finding] = findings(pod)
    assert finding.where == "pod.spec.hostNetwork" and "no host namespaces" in finding.why


def test_zero_sidecar_limits_are_refused():
    """What the runs used to carry on every cluster."""
    pod = autopilot_pod()
    pod["metadata"]["annotations"]["gke-gcsfuse/memory-limit"] = "0"
    [finding] = findings(pod)
    assert "gke-gcsfuse/memory-limit" in finding.where and finding.source.endswith("troubleshooting.md")


@pytest.mark.parametrize("resource", ["cpu", "memory"])
def test_a_container_without_cpu_or_memory_requests_is_flagged(resource):
    """The A4 pod used to ask for GPUs only, and would have got Autopilot's small defaults."""
    pod = autopilot_pod()
    del pod["spec"]["containers"][0]["resources"]["requests"][resource]
    [finding] = findings(pod)
    assert finding.where.endswith(f"requests.{resource}") and "small default" in finding.why


def test_requests_above_what_autopilot_is_known_to_admit_are_flagged():
    pod = autopilot_pod()
    pod["spec"]["containers"][0]["resources"]["requests"]["memory"] = "2000Gi"
    [finding] = findings(pod, catalog.NVIDIA_B200)
    assert "above the 1200Gi" in finding.why


def test_a4_requests_on_autopilot_stay_within_the_tutorial_s():
    values = reader.model_values(reader.file_values("autopilot", ROOT), "autopilot")
    values["runs"] = [{"name": "sql", "trainer": "trl-gpu", "pool": "a4"}]
    gpu = stack_manifests(reader.validate(values))["sql"]
    requests = gpu["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
    assert requests["memory"] == "1200Gi" and requests["cpu"] == "200"


def test_multislice_on_autopilot_is_rejected_before_anything_is_declared():
    shapes = [{"name": "v6e-2x4", "accelerator": "tpu-v6e", "topology": "2x4", "machineType": "ct6e-standard-4t",
               "slices": 2}]
    declared, err = declared_before_error("autopilot", overrides={"gke-finetune:shapes": shapes,
                                                                  "gke-finetune:runs": []})
    assert isinstance(err, ConfigError) and declared.resources == []
    assert any(p.startswith("shapes[0].slices: 2 needs host networking for multislice") for p in err.problems)
