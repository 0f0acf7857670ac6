"""Stacks that share a project, a bucket or a cluster: what one declares never reaches another's.

Under the SDK's mocks, every stack of a project gets the same project number,
so the principals compare as they would in one real project.
"""

from __future__ import annotations

import functools

import yaml

from tests.support.pulumi_harness import ROOT, SHIPPED_STACKS, run_stack

GRANT = "gcp:storage/bucketIAMMember:BucketIAMMember"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
JOB = "kubernetes:batch/v1:Job"
PROVIDER = "pulumi:providers:kubernetes"
EXISTING = "existing-dev"
NUMBER = "123456789012"


@functools.cache
def deployed(stack: str):
    return run_stack(stack, secrets=None)


def members(stack: str) -> set[str]:
    return {g.inputs["member"] for g in deployed(stack).of_type(GRANT)}


def written_prefixes(grants) -> set[str]:
    """Every object prefix the write grants' conditions allow."""
    found = set()
    for grant in grants:
        condition = grant.inputs.get("condition")
        if condition:
            found |= {clause.split('"')[1] for clause in condition["expression"].split(" || ")}
    return found


def test_no_two_stacks_of_a_project_share_a_principal_or_a_bucket():
    for a in SHIPPED_STACKS:
        for b in SHIPPED_STACKS:
            if a < b:
                assert not members(a) & members(b), (a, b)
                buckets = {g.inputs["bucket"] for g in deployed(b).of_type(GRANT)}
                assert f"my-project-id-{a}-finetune" not in buckets, (a, b)


def existing_stack(namespace: str, run: str, dataset: str) -> dict:
    """The existing-cluster stack as a second team would write it: another namespace and stack, the same
    bucket (the platform team's), its own run and dataset, the stack's own grants."""
    config = yaml.safe_load((ROOT / f"Pulumi.{EXISTING}.yaml").read_text())["config"]
    [run_config] = config["gke-finetune:runs"]
    [dataset_config] = config["gke-finetune:datasets"]
    return {
        "gke-finetune:namespace": namespace,
        "gke-finetune:projectNumber": NUMBER,
        "gke-finetune:existingCluster": {**config["gke-finetune:existingCluster"], "bucketGrants": True},
        "gke-finetune:runs": [{**run_config, "name": run, "data": dataset}],
        "gke-finetune:datasets": [{**dataset_config, "name": dataset}],
    }


def test_a_second_stack_on_the_same_bucket_is_granted_nothing_of_the_firsts_prefixes():
    first = run_stack(EXISTING, overrides=existing_stack("team-a", "gemma3-a", "stories-a"), secrets=None)
    second = run_stack(EXISTING, overrides=existing_stack("team-b", "gemma3-b", "stories-b"), secrets=None)
    a, b = first.of_type(GRANT), second.of_type(GRANT)
    assert {g.inputs["bucket"] for g in a} == {g.inputs["bucket"] for g in b}  # one bucket
    assert not {g.inputs["member"] for g in a} & {g.inputs["member"] for g in b}
    assert all("/ns/team-b/" in g.inputs["member"] for g in b)
    bucket = "projects/_/buckets/my-project-id-team-finetune/objects"
    assert written_prefixes(a) >= {f"{bucket}/checkpoints/{EXISTING}/gemma3-a/", f"{bucket}/datasets/{EXISTING}/stories-a/"}
    assert not [p for p in written_prefixes(b) if "gemma3-a" in p or "stories-a" in p]
    # Nor anything of the first's by prefix: every write of the second is below its own run or dataset.
    assert all(p.split("/")[-2] in ("gemma3-b", "stories-b") for p in written_prefixes(b)), written_prefixes(b)


def test_runs_and_staging_jobs_wait_for_their_grants_so_destroy_revokes_them_last():
    for stack in SHIPPED_STACKS:
        d = deployed(stack)
        grants = {g.urn for g in d.of_type(GRANT)}
        trainer = {g.urn for g in d.of_type(GRANT) if g.inputs["member"].endswith(f"/sa/{stack}-trainer")}
        stager = {g.urn for g in d.of_type(GRANT) if g.inputs["member"].endswith(f"/sa/{stack}-stager")}
        for run in d.of_type(JOBSET):
            assert trainer <= set(run.dependencies), (stack, run.name)
        for job in d.of_type(JOB):
            assert stager <= set(job.dependencies) and stager <= grants, (stack, job.name)


def test_a_runs_delete_outlasts_its_grace_period():
    """The provider deletes a JobSet in the foreground (it waits for the pods); its default timeout, 10
    minutes, would equal the GPU trainer's grace period."""
    for stack in SHIPPED_STACKS:
        for run in deployed(stack).of_type(JOBSET):
            grace = run.inputs["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
                "terminationGracePeriodSeconds"]
            assert int(run.delete_timeout.removesuffix("s")) >= grace + 300, (stack, run.name, run.delete_timeout)


def test_the_kubernetes_provider_is_the_cluster_not_its_endpoint():
    """An endpoint change (the IP endpoint switched on by authorizedNetworks, an IP rotation) leaves the
    provider's identity, and so every in-cluster object, in place."""
    dns = deployed("dev").of_type(PROVIDER)[0].inputs
    ip = run_stack("dev", overrides={"gke-finetune:network": {"authorizedNetworks": ["203.0.113.0/24"]}},
                   secrets=None).of_type(PROVIDER)[0].inputs
    assert dns["kubeconfig"] != ip["kubeconfig"]
    expected = "projects/my-project-id/locations/us-east5/clusters/finetune-dev"
    assert dns["clusterIdentifier"] == ip["clusterIdentifier"] == expected
    by_name = run_stack(EXISTING, overrides={"gke-finetune:existingCluster": {"name": "team", "location": "us-east5"}},
                        secrets=None).of_type(PROVIDER)[0].inputs
    assert by_name["clusterIdentifier"] == "projects/my-project-id/locations/us-east5/clusters/team"
