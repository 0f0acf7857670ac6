"""Fit: a pod's requests, the FUSE sidecar and memory-backed volumes included, against its node."""

import copy
from pathlib import Path

import pytest

from admission import fit
from admission.check import admission_problems, fit_table, stack_manifests
from core.allocatable import node_allocatable
from core.machines import MACHINES
from stack import reader
from tools.render import shipped_stacks

ROOT = Path(__file__).resolve().parents[2]
GIB = 2**30


def pod_of(manifest):
    return manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]


@pytest.mark.parametrize("stack", shipped_stacks())
def test_every_shipped_run_fits_its_node(stack):
    config = reader.load_files(stack, ROOT)
    assert admission_problems(config) == []
    rows = fit_table(config)
    assert rows and all(r["fits"] for r in rows)
    assert {r["resource"] for r in rows} == {"cpu", "memory", "ephemeral-storage"}


def test_the_old_50gi_sidecar_request_never_fits_a_default_boot_disk():
    """The TPU pods used to ask 50Gi of ephemeral storage for the FUSE sidecar on 100 GB boot disks."""
    manifest = stack_manifests(reader.load_files("dev", ROOT))["gemma3-single-host"]
    pod = copy.deepcopy(pod_of(manifest))
    pod["metadata"]["annotations"]["gke-gcsfuse/ephemeral-storage-request"] = "50Gi"
    default_disk = node_allocatable(MACHINES["ct6e-standard-1t"], 100, local_ssd_ephemeral=False)
    [finding] = fit.fit_findings(pod, default_disk, "pod")
    assert finding.rule == "fit" and finding.where == "pod.ephemeral-storage"
    assert "more than the node's 43.8Gi allocatable" in finding.why
    assert finding.source.startswith("https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes")


def test_tpu_data_cache_is_capped_in_memory_and_counted():
    manifest = stack_manifests(reader.load_files("dev", ROOT))["gemma3-single-host"]
    pod = pod_of(manifest)
    data = next(v for v in pod["spec"]["volumes"] if v["name"] == "data")
    assert "file-cache:max-size-mb:-1" not in data["csi"]["volumeAttributes"]["mountOptions"]
    assert "file-cache:max-size-mb:31744" in data["csi"]["volumeAttributes"]["mountOptions"]  # under 32Gi
    cache = next(v for v in pod["spec"]["volumes"] if v["name"] == "gke-gcsfuse-cache")
    assert cache["emptyDir"] == {"medium": "Memory", "sizeLimit": "32Gi"}
    asked = fit.pod_requests(pod)
    trainer = pod["spec"]["containers"][0]["resources"]["requests"]
    assert asked["memory"] == pytest.approx((int(trainer["memory"][:-2]) + 1 + 32) * GIB)  # + sidecar + cache


def test_native_sidecars_add_and_plain_init_containers_peak():
    base = {"metadata": {}, "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "2"}}}]}}
    with_sidecar = copy.deepcopy(base)
    with_sidecar["spec"]["initContainers"] = [
        {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
        {"name": "i", "resources": {"requests": {"cpu": "5"}}},
    ]
    assert fit.pod_requests(base)["cpu"] == 2
    assert fit.pod_requests(with_sidecar)["cpu"] == 6  # init 5 + the sidecar started before it


def test_the_fuse_sidecar_counts_with_the_driver_defaults_when_unannotated():
    pod = {"metadata": {"annotations": {"gke-gcsfuse/volumes": "true"}}, "spec": {"containers": []}}
    assert fit.pod_requests(pod)["ephemeral-storage"] == 5 * GIB
    assert fit.pod_requests(pod)["cpu"] == 0.25


def test_a4_shared_memory_is_within_the_trainer_s_memory_limit_and_counted_once():
    """/dev/shm's pages are charged to the trainer that writes them, within its memory limit: the pod's
    memory is its containers' (trainer and FUSE sidecar); without the limits the volume counts on top."""
    manifest = stack_manifests(reader.load_files("a4", ROOT))["gemma4-sql"]
    pod = pod_of(manifest)
    trainer = pod["spec"]["containers"][0]["resources"]
    assert trainer["limits"]["memory"] == trainer["requests"]["memory"]
    assert fit.pod_requests(pod)["memory"] == pytest.approx((int(trainer["requests"]["memory"][:-2]) + 1) * GIB)
    del trainer["limits"]["memory"]
    assert fit.pod_requests(pod)["memory"] == pytest.approx((int(trainer["requests"]["memory"][:-2]) + 1 + 64) * GIB)


def test_a_tpu_pod_s_memory_cache_is_held_by_the_fuse_sidecar_s_memory_limit():
    manifest = stack_manifests(reader.load_files("dev", ROOT))["gemma3-single-host"]
    pod = pod_of(manifest)
    annotations = pod["metadata"]["annotations"]
    assert annotations["gke-gcsfuse/memory-limit"] == annotations["gke-gcsfuse/memory-request"] == "33Gi"
    bounded = fit.pod_requests(pod)["memory"]
    annotations["gke-gcsfuse/memory-limit"] = "0"  # no limit: the cache is node memory no request holds
    assert fit.pod_requests(pod)["memory"] == pytest.approx(bounded + 32 * GIB)


def test_every_shape_requests_cpu_and_memory():
    for stack in shipped_stacks():
        for manifest in stack_manifests(reader.load_files(stack, ROOT)).values():
            requests = pod_of(manifest)["spec"]["containers"][0]["resources"]["requests"]
            assert {"cpu", "memory", "ephemeral-storage"} <= set(requests), stack


def test_the_a4_request_of_the_nominal_model_does_not_fit_the_kubelets_capacity():
    """3808Gi fitted a node modelled from the machine's nominal 3968 GiB; on the kubelet's capacity
    (the kernel's share taken off), with the model's margin kept free, it does not."""
    manifest = stack_manifests(reader.load_files("a4", ROOT))["gemma4-sql"]
    pod = copy.deepcopy(pod_of(manifest))
    pod["spec"]["containers"][0]["resources"]["requests"]["memory"] = "3808Gi"
    node = node_allocatable(MACHINES["a4-highgpu-8g"], 200, local_ssd_ephemeral=True)
    [finding] = fit.fit_findings(pod, node, "pod")
    assert finding.where == "pod.memory" and "less the 38.2Gi margin" in finding.why
    # The shipped request leaves the margin and the DaemonSets' room.
    rows = fit_table(reader.load_files("a4", ROOT))
    [memory] = [r for r in rows if r["resource"] == "memory" and r["run"] == "gemma4-sql"]
    assert memory["fits"] and memory["margin"] == "38.2Gi"
    # The stack's model server owns the same kind of VM, and fits it the same way.
    [served] = [r for r in rows if r["resource"] == "memory" and r["run"] == "serve gemma4-sql"]
    assert served["fits"] and served["margin"] == "38.2Gi"


def test_a_memory_backed_volume_without_a_limit_is_refused():
    pod = {"metadata": {}, "spec": {"containers": [], "volumes": [{"name": "v", "emptyDir": {"medium": "Memory"}}]}}
    node = node_allocatable(MACHINES["ct6e-standard-1t"], 200, local_ssd_ephemeral=False)
    [finding] = fit.fit_findings(pod, node, "pod")
    assert finding.where == "pod.volumes[0].emptyDir.sizeLimit" and "fill the node's memory" in finding.why
