"""The staging Jobs: valid batch/v1 Jobs on the system pool, writing only their dataset's prefix."""

import json

import kubernetes_validate
import pytest

from admission import pod_security, syntax
from core.names import KUBERNETES_VERSION
from tests.support import goldens
from tools.offline import EXISTING_CLUSTER_STACKS
from tools.render import shipped_stacks, staging_manifests, to_yaml

JOBS = [pytest.param(s, n, j, id=f"{s}/{n}") for s in shipped_stacks() for n, j in staging_manifests(s).items()]


def pod(job):
    return job["spec"]["template"]


@pytest.mark.parametrize("stack", shipped_stacks())
def test_every_shipped_stack_stages_its_datasets_and_the_goldens_match(stack):
    jobs = staging_manifests(stack)
    assert jobs, f"Pulumi.{stack}.yaml stages no dataset"
    directory = goldens.GOLDEN_DIR / stack / goldens.DATASETS
    assert {p.stem for p in directory.glob("*.yaml")} == set(jobs)
    for name, job in jobs.items():
        assert (directory / f"{name}.yaml").read_text() == to_yaml(job), f"{name}: run `make golden`"


@pytest.mark.parametrize("stack, name, job", JOBS)
def test_the_job_validates_strictly_and_by_kubernetes_syntax(stack, name, job):
    kubernetes_validate.validate(job, KUBERNETES_VERSION, strict=True)
    assert list(syntax.pod_findings(pod(job), "template")) == []
    assert list(syntax.object_name_findings(job["metadata"], "metadata")) == []


def test_a_typo_in_a_job_fails_strict_validation():
    job = next(iter(staging_manifests("dev").values()))
    job["spec"]["template"]["spec"]["containers"][0]["imagePullPolicey"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("stack, name, job", JOBS)
def test_the_job_writes_only_its_dataset_and_runs_off_the_accelerators(stack, name, job):
    spec = pod(job)["spec"]
    dataset = name.removeprefix("stage-")
    [volume] = [v for v in spec["volumes"] if v["name"] == "dataset"]
    assert volume["csi"]["readOnly"] is False
    assert volume["csi"]["volumeAttributes"]["mountOptions"].endswith(f"only-dir=datasets/{stack}/{dataset}")
    # The stack's own stager account (a principal of its own in a project of several stacks).
    assert spec["serviceAccountName"] == f"{stack}-stager" and spec["automountServiceAccountToken"] is False
    assert "tolerations" not in spec  # accelerator nodes are tainted: never there
    if stack in EXISTING_CLUSTER_STACKS:
        assert "nodeSelector" not in spec  # an existing cluster has no system pool of the platform's
    elif stack != "autopilot":
        assert spec["nodeSelector"] == {"cloud.google.com/gke-nodepool": "system"}
    containers = spec.get("initContainers", []) + spec["containers"]
    assert all("@sha256:" in c["image"] for c in containers)
    assert job["spec"]["podFailurePolicy"]["rules"][0]["onExitCodes"]["values"] == [78]
    assert "pulumi.com/skipAwait" not in job["metadata"].get("annotations", {})  # awaited, unlike runs


def test_a_tokenized_dataset_is_staged_then_tokenized_in_the_jax_image():
    job = staging_manifests("dev")["stage-tinystories"]
    spec = pod(job)["spec"]
    [stage], [tokenize] = spec["initContainers"], spec["containers"]
    assert stage["command"][:3] == ["python", "-m", "trainers.staging"]
    source = json.loads(stage["command"][stage["command"].index("--source") + 1])
    assert source == {"kind": "url", "file": "TinyStories-train.txt",
                      "url": "https://huggingface.co/datasets/roneneldan/TinyStories/resolve/main/TinyStories-train.txt"}
    assert tokenize["command"][:3] == ["python", "-m", "trainers.gemma_jax.token_shards"]
    assert tokenize["command"][-2:] == ["--model", "gemma3-270m"]
    assert stage["image"] == tokenize["image"]
    assert "/gemma-jax@sha256:" in tokenize["image"]


def test_the_a4_dataset_is_staged_in_the_gpu_image_as_its_user():
    job = staging_manifests("a4")["stage-text-to-sql"]
    spec = pod(job)["spec"]
    assert "/trl-gpu@sha256:" in spec["containers"][0]["image"]
    assert spec["securityContext"]["runAsUser"] == 1000
    assert "uid=1000" in spec["volumes"][0]["csi"]["volumeAttributes"]["mountOptions"]


@pytest.mark.parametrize("stack", ["dev", "a4"])
def test_a_staging_job_runs_as_its_image_s_non_root_account_and_meets_the_restricted_standard(stack):
    """Staging touches no accelerator: even in the root TPU trainer's image it runs as the image's own
    non-root account (core/trainers.py `jobs_user`), its mounts owned by it, every capability dropped."""
    for job in staging_manifests(stack).values():
        spec = pod(job)["spec"]
        assert spec["securityContext"]["runAsUser"] == spec["securityContext"]["runAsGroup"] == 1000
        assert spec["securityContext"]["runAsNonRoot"] is True
        for volume in (v for v in spec["volumes"] if "csi" in v):
            assert "uid=1000,gid=1000" in volume["csi"]["volumeAttributes"]["mountOptions"], volume
        assert pod_security.least_level(pod(job)) == (pod_security.RESTRICTED, [])
