"""Which runs of each shipped stack go through Kueue, and what the program declares for it."""

from __future__ import annotations

import pytest

from admission.shared_cluster import owner_values
from manifests.controllers import kueue_chart_values
from manifests.kueue import PRIORITY_LABEL, QUEUE_LABEL
from tests.support.pulumi_harness import ROOT, SHIPPED_STACKS, run_stack
from tools import render

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
RELEASE = "kubernetes:helm.sh/v3:Release"
KUEUE_TYPES = ("ResourceFlavor", "ClusterQueue", "LocalQueue", "AdmissionCheck",
               "ProvisioningRequestConfig", "WorkloadPriorityClass")  # fmt: skip

# Per shipped stack: the runs Kueue admits, and those applied as plain JobSets.
THROUGH_KUEUE = {
    "dev": ((), ("gemma3-single-host",)),
    "tpu-multihost": ((), ("gemma3-multi-host",)),
    "tpu-multislice": ((), ("gemma3-multislice",)),
    "tpu-queued": (("gemma3-ladder", "own-container"), ("gemma3-single-host",)),
    "a4": ((), ("gemma4-sql",)),
    "autopilot": ((), ("gemma3-single-host",)),
}


def test_every_shipped_stack_is_listed():
    assert set(THROUGH_KUEUE) == set(SHIPPED_STACKS)


def _kueue_objects(deployment) -> list:
    return [r for r in deployment.resources if r.type.startswith("kubernetes:kueue.x-k8s.io/")]


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_which_runs_go_through_kueue(stack):
    queued, plain = THROUGH_KUEUE[stack]
    jobsets = {r.inputs["metadata"]["name"]: r for r in run_stack(stack).of_type(JOBSET)}
    assert set(jobsets) == set(queued) | set(plain)
    for name in queued:
        declared = jobsets[name]
        assert declared.inputs["metadata"]["labels"][QUEUE_LABEL] == "finetune"
        assert declared.inputs["spec"]["suspend"] is True  # Kueue unsuspends it on admission
        assert declared.ignore_changes == ("spec.suspend",)  # and Pulumi does not fight it
    for name in plain:
        declared = jobsets[name]
        assert QUEUE_LABEL not in declared.inputs["metadata"]["labels"]
        assert PRIORITY_LABEL not in declared.inputs["metadata"]["labels"]
        assert declared.ignore_changes == ()


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_kueue_is_installed_only_where_runs_need_it(stack):
    deployment = run_stack(stack)
    releases = {r.inputs["name"]: r for r in deployment.of_type(RELEASE)}
    config_needs_it = bool(render.stack_kueue_manifests(stack))
    assert ("kueue" in releases) == config_needs_it == bool(THROUGH_KUEUE[stack][0])
    assert bool(_kueue_objects(deployment)) == config_needs_it
    if not config_needs_it:  # no queued pool, no ladder, no priority
        assert not any(QUEUE_LABEL in r.inputs["metadata"]["labels"] for r in deployment.of_type(JOBSET))


def test_the_queued_stack_declares_every_kueue_object_after_the_chart():
    deployment = run_stack("tpu-queued")
    release = {r.inputs["name"]: r for r in deployment.of_type(RELEASE)}["kueue"]
    assert release.inputs["chart"] == "oci://registry.k8s.io/kueue/charts/kueue"
    assert release.inputs["version"] == "0.19.2"
    assert release.inputs["namespace"] == "kueue-system"
    objects = _kueue_objects(deployment)
    assert {r.type.rsplit(":", 1)[1] for r in objects} == set(KUEUE_TYPES)
    assert all(release.urn in r.dependencies for r in objects)
    expected = render.stack_kueue_manifests("tpu-queued")
    declared = {f"{r.type.rsplit(':', 1)[1].lower()}-{r.inputs['metadata']['name']}": r for r in objects}
    assert set(declared) == set(expected)
    for key, manifest in expected.items():
        assert declared[key].inputs == manifest
    [ladder] = [r for r in deployment.of_type(JOBSET) if r.inputs["metadata"]["name"] == "gemma3-ladder"]
    assert all(r.urn in ladder.dependencies for r in objects)
    assert ladder.inputs["metadata"]["labels"][PRIORITY_LABEL] == "finetune-normal"  # the namespace's class


def test_the_program_installs_kueue_with_those_values():
    releases = {r.inputs["name"]: r.inputs for r in run_stack("tpu-queued").of_type("kubernetes:helm.sh/v3:Release")}
    # The chart's values, and who installed it (read back by a stack that finds it in a shared cluster).
    assert releases["kueue"]["values"] == {**kueue_chart_values("finetune"), **owner_values("kueue", "finetune", "tpu-queued")}
    assert releases["jobset"]["values"] == owner_values("jobset", "finetune", "tpu-queued")


@pytest.mark.parametrize("stack", ["tpu-queued", "dev"])
def test_a_stack_never_uninstalls_the_controllers_it_installed(stack):
    """Other stacks on the cluster use them, and Kueue's uninstall deletes its CRDs (every team's queues and
    workloads): `destroy` leaves each release in the cluster. The stack's own queueing objects are its own."""
    deployment = run_stack(stack)
    releases = {r.inputs["name"]: r for r in deployment.of_type(RELEASE)}
    assert "jobset" in releases
    assert all(r.retain_on_delete for r in releases.values()), releases
    assert not any(r.retain_on_delete for r in _kueue_objects(deployment))


def _shared_pool_overrides() -> dict:
    """The existing-cluster stack's pool shared with other teams (a quota of it), its run through Kueue."""
    from tools.offline import file_values

    values = file_values("existing-dev", ROOT)
    [pool], [run] = values["gke-finetune:pools"], values["gke-finetune:runs"]
    return {"gke-finetune:pools": [{**pool, "quota": {"chips": 1}}],
            "gke-finetune:runs": [{**run, "priority": "normal"}]}


def test_a_shared_pools_flavor_is_applied_and_relinquished_never_created_or_deleted():
    """Other stacks' ClusterQueues name a shared pool's flavor: each stack applies it as the provider's Patch
    resource (created where missing, co-owned where another stack made it), whose delete leaves the object;
    the stack's own ClusterQueue, in the pool's cohort, is its own to create and delete."""
    deployment = run_stack("existing-dev", overrides=_shared_pool_overrides())
    objects = {r.inputs["kind"]: r for r in _kueue_objects(deployment)}
    flavor, queue = objects["ResourceFlavor"], objects["ClusterQueue"]
    assert flavor.type == "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavorPatch", flavor.type
    assert flavor.inputs["metadata"]["name"].startswith("gke-finetune-shared-")
    assert queue.type == "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
    assert queue.inputs["spec"]["cohortName"].startswith("gke-finetune-shared-")


def test_the_ladder_controller_s_deployment_waits_for_what_its_pod_uses():
    """Its ConfigMap (a new name for each version of the file), service account and Role are there first."""
    d = run_stack("tpu-queued")
    [deployment] = d.of_type("kubernetes:apps/v1:Deployment")
    used = {r.urn for t in ("core/v1:ConfigMap", "core/v1:ServiceAccount", "rbac.authorization.k8s.io/v1:Role",
                            "rbac.authorization.k8s.io/v1:RoleBinding") for r in d.of_type(f"kubernetes:{t}")
            if r.inputs["metadata"]["name"].startswith("gke-finetune-ladder")}
    assert len(used) == 4 and used <= set(deployment.dependencies)
    # The runs wait for the queues, not for it: it acts only once a run is evicted.
    [queue] = d.of_type("kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue")
    for jobset in d.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"):
        assert deployment.urn not in jobset.dependencies and not used & set(jobset.dependencies)
    assert any(queue.urn in j.dependencies for j in d.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"))
