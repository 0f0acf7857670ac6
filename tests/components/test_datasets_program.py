"""What the program declares for the stack's datasets: awaited staging Jobs, their identity, the order."""

import functools

import pytest

from tests.support.pulumi_harness import SHIPPED_STACKS, run_stack

JOB = "kubernetes:batch/v1:Job"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
GRANT = "gcp:storage/bucketIAMMember:BucketIAMMember"
PRINCIPALS = ("principal://iam.googleapis.com/projects/123456789012/locations/global/"
              "workloadIdentityPools/my-project-id.svc.id.goog/subject/ns/finetune/sa/")


def stager(stack: str) -> str:
    """The stack's stager principal: its own account in the stack's namespace."""
    return f"{PRINCIPALS}{stack}-stager"


@functools.cache
def deployed(stack):
    return run_stack(stack, secrets=None)


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_each_dataset_is_staged_by_an_awaited_job_before_the_runs(stack):
    d = deployed(stack)
    jobs = d.of_type(JOB)
    assert jobs and all(j.inputs["metadata"]["name"].startswith("stage-") for j in jobs)
    for job in jobs:
        assert "pulumi.com/skipAwait" not in job.inputs["metadata"].get("annotations", {})
        assert job.replace_on_changes == ("spec",) and job.create_timeout == "21600s"
    for run in d.of_type(JOBSET):
        assert {j.urn for j in jobs} <= set(run.dependencies), run.name
    assert set(d.outputs["datasets"]) == {j.inputs["metadata"]["name"].removeprefix("stage-") for j in jobs}


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_the_stager_writes_only_below_its_own_datasets(stack):
    grants = [g.inputs for g in deployed(stack).of_type(GRANT) if g.inputs["member"] == stager(stack)]
    assert {g["role"] for g in grants} == {"roles/storage.objectViewer", "roles/storage.objectUser"}
    writes = [g for g in grants if g["role"] == "roles/storage.objectUser"]
    bucket = f"projects/_/buckets/my-project-id-{stack}-finetune"
    # One write grant per dataset, each below that dataset's own prefix only.
    names = [j.inputs["metadata"]["name"].removeprefix("stage-") for j in deployed(stack).of_type(JOB)]
    assert sorted(w["condition"]["expression"] for w in writes) == sorted(
        f'resource.name.startsWith("{bucket}/objects/datasets/{stack}/{name}/") || '
        f'resource.name.startsWith("{bucket}/folders/datasets/{stack}/{name}/")' for name in names)
    trainer_roles = {g.inputs["role"] for g in deployed(stack).of_type(GRANT)
                     if g.inputs["member"] == f"{PRINCIPALS}{stack}-trainer"}
    assert trainer_roles == {"roles/storage.objectViewer", "roles/storage.objectUser"}  # datasets read-only for it
    [ksa] = [a for a in deployed(stack).of_type("kubernetes:core/v1:ServiceAccount") if a.name == "datasets-ksa"]
    assert ksa.inputs["metadata"] == {"name": f"{stack}-stager", "namespace": "finetune"}


def test_a_gcs_source_s_bucket_is_readable_by_the_stager():
    datasets = [{"name": "corpus", "gcs": "gs://team-corpora/stories/v2"}]
    runs = [{"name": "r", "trainer": "gemma-jax", "pool": "v6e-1x1", "data": "corpus/stories.txt",
             "args": ["--batch_size", "64"]}]  # what one v6e chip holds
    d = run_stack("dev", overrides={"gke-finetune:datasets": datasets, "gke-finetune:runs": runs})
    [source] = [g.inputs for g in d.of_type(GRANT) if g.inputs["bucket"] == "team-corpora"]
    assert (source["role"], source["member"]) == ("roles/storage.objectViewer", stager("dev"))
    [job] = d.of_type(JOB)
    [volume] = [v for v in job.inputs["spec"]["template"]["spec"]["volumes"] if v["name"] == "source"]
    assert volume["csi"]["volumeAttributes"] == {"bucketName": "team-corpora",
                                                 "mountOptions": "implicit-dirs,uid=1000,gid=1000,only-dir=stories/v2"}


def test_a_gated_hub_dataset_mounts_the_token_from_secret_manager_with_the_stagers_own_grant():
    datasets = [{"name": "gated", "hub": {"id": "org/gated", "token": True}}]
    d = run_stack("dev", overrides={"gke-finetune:datasets": datasets, "gke-finetune:runs": []})
    [job] = d.of_type(JOB)
    spec = job.inputs["spec"]["template"]["spec"]
    [stage] = spec["containers"]
    assert stage["command"][-2:] == ["--token-file", "/var/run/secrets/huggingface/token"]
    assert not [e for e in stage.get("env", []) if "TOKEN" in e["name"] and "value" in e and e["name"] != "HF_TOKEN_PATH"]
    [token] = [v for v in spec["volumes"] if v["name"] == "hf-token"]
    assert token["csi"] == {"driver": "secrets-store-gke.csi.k8s.io", "readOnly": True,
                            "volumeAttributes": {"secretProviderClass": "hf-token"}}
    assert not d.of_type("kubernetes:core/v1:Secret")
    [grant] = d.of_type("gcp:secretmanager/secretIamMember:SecretIamMember")
    assert (grant.inputs["secretId"], grant.inputs["member"]) == ("hf-token", stager("dev"))
    assert grant.urn in job.dependencies, "the Job waits for its grant: the mount reads the secret at start"
