"""The Hugging Face token reaches the pods that read the Hub from Secret Manager, through GKE's add-on, and
Pulumi holds none of it: what each stack declares, offline, as `up` and as `preview`."""

from __future__ import annotations

import functools
import json

import pytest
import yaml

from manifests.token import GKE_SECRETS_DRIVER
from stack.problems import ConfigError
from stack.reader import load_files
from tests.support.pulumi_harness import EXISTING_CLUSTER_STACKS, ROOT, SHIPPED_STACKS, declared_before_error, run_stack
from tests.support.schemas import secret_provider_class_problems

SPC = "kubernetes:secrets-store.csi.x-k8s.io/v1:SecretProviderClass"
GRANT = "gcp:secretmanager/secretIamMember:SecretIamMember"
CLUSTER = "gcp:container/cluster:Cluster"
SECRET_SIG = "4dabf18193072939515e22adb298388d"  # how the wire format marks a secret value
POD_KINDS = ("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", "kubernetes:batch/v1:Job")


@functools.cache
def deployed(stack: str, preview: bool = False, **overrides):
    return run_stack(stack, overrides=dict(overrides) or None, preview=preview)


def reads_hub(stack: str) -> bool:
    return load_files(stack, ROOT).reads_hub


def pod_specs(d) -> list[dict]:
    """Every pod template the stack declares (each run's replicated jobs, each staging Job)."""
    specs = []
    for r in d.resources:
        if r.type == POD_KINDS[0]:
            specs += [j["template"]["spec"]["template"]["spec"] for j in r.inputs["spec"]["replicatedJobs"]]
        elif r.type == POD_KINDS[1]:
            specs.append(r.inputs["spec"]["template"]["spec"])
    return specs


def _secret_values(value, path="") -> list[str]:
    if isinstance(value, dict):
        if value.get(SECRET_SIG):
            return [path]
        return [p for k, v in value.items() for p in _secret_values(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _secret_values(v, f"{path}[{i}]")]
    return []


@pytest.mark.parametrize("stack", [*SHIPPED_STACKS, *EXISTING_CLUSTER_STACKS])
@pytest.mark.parametrize("preview", [False, True])
def test_no_stack_declares_a_secret_value_and_the_stacks_hold_none(stack, preview):
    """Pulumi's state holds the inputs: none is a secret, so none is the token (or any third party's)."""
    d = deployed(stack, preview)
    found = [f"{r.type} {r.name}{p}" for r in d.resources for p in _secret_values(r.inputs)]
    assert found == []
    assert d.of_type("kubernetes:core/v1:Secret") == []


@pytest.mark.parametrize("stack", [s for s in SHIPPED_STACKS if reads_hub(s)])
def test_a_stack_that_reads_the_hub_mounts_the_token_from_secret_manager(stack):
    d = deployed(stack)
    [spc] = d.of_type(SPC)
    manifest = {"apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClass", **spc.inputs}
    assert secret_provider_class_problems(manifest) == []
    assert yaml.safe_load(spc.inputs["spec"]["parameters"]["secrets"]) == [
        {"resourceName": "projects/my-project-id/secrets/hf-token/versions/latest", "path": "token"}]
    [cluster] = d.of_type(CLUSTER)
    assert cluster.inputs["secretManagerConfig"] == {"enabled": True}
    [grant] = d.of_type(GRANT)
    assert grant.inputs["role"] == "roles/secretmanager.secretAccessor"
    assert (grant.inputs["project"], grant.inputs["secretId"]) == ("my-project-id", "hf-token")
    assert grant.inputs["member"].endswith(f"/subject/ns/finetune/sa/{stack}-trainer")
    hub_pods = [s for s in pod_specs(d) if any(v["name"] == "hf-token" for v in s["volumes"])]
    assert hub_pods, "the run that reads the Hub mounts the token"
    for spec in hub_pods:
        [volume] = [v for v in spec["volumes"] if v["name"] == "hf-token"]
        assert volume["csi"] == {"driver": GKE_SECRETS_DRIVER, "readOnly": True,
                                 "volumeAttributes": {"secretProviderClass": spc.inputs["metadata"]["name"]}}
    for jobset in d.of_type(POD_KINDS[0]):
        assert spc.urn in jobset.dependencies and grant.urn in jobset.dependencies


@pytest.mark.parametrize("stack", [s for s in SHIPPED_STACKS if not reads_hub(s)])
def test_a_stack_whose_runs_read_no_hub_gets_nothing_of_the_token(stack):
    d = deployed(stack)
    assert d.of_type(SPC) == [] and d.of_type(GRANT) == []
    assert "secretManagerConfig" not in d.of_type(CLUSTER)[0].inputs
    assert "secretmanager.googleapis.com" not in {s.inputs["service"] for s in d.of_type("gcp:projects/service:Service")}
    for spec in pod_specs(d):
        assert "hf-token" not in json.dumps(spec) and "HF_TOKEN" not in json.dumps(spec)


def test_only_the_pods_that_read_the_hub_get_the_token():
    """a4 with a TPU-less second run of one's own container that does not ask for it."""
    runs = yaml.safe_load((ROOT / "Pulumi.a4.yaml").read_text())["config"]["gke-finetune:runs"]
    own = {"name": "own", "pool": runs[0]["pool"], "image": "us-docker.pkg.dev/p/r/own@sha256:" + "a" * 64,
           "command": ["python", "train.py"]}
    d = run_stack("a4", overrides={"gke-finetune:runs": [*runs, own]})
    by_run = {j.inputs["metadata"]["name"]: j for j in d.of_type(POD_KINDS[0])}
    assert "hf-token" in json.dumps(by_run[runs[0]["name"]].inputs)
    assert "hf-token" not in json.dumps(by_run["own"].inputs) and "HF_TOKEN" not in json.dumps(by_run["own"].inputs)


def test_a_secret_of_another_project_and_version_is_mounted_and_granted_there():
    d = run_stack("a4", overrides={"gke-finetune:hfTokenSecret": "projects/shared-secrets/secrets/team-hf/versions/7"})
    [spc] = d.of_type(SPC)
    assert yaml.safe_load(spc.inputs["spec"]["parameters"]["secrets"])[0]["resourceName"] == (
        "projects/shared-secrets/secrets/team-hf/versions/7")
    [grant] = d.of_type(GRANT)
    assert (grant.inputs["project"], grant.inputs["secretId"]) == ("shared-secrets", "team-hf")


GATED = [{"name": "gated", "hub": {"id": "org/gated", "token": True}}]


@pytest.mark.parametrize("grants", [False, True])
def test_an_existing_cluster_stack_grants_the_token_only_where_it_declares_its_grants(grants):
    """Without bucketGrants the platform team grants the principals (docs/existing-clusters.md)."""
    stack = EXISTING_CLUSTER_STACKS[0]
    existing = {**yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]["gke-finetune:existingCluster"],
                "bucketGrants": grants}
    d = run_stack(stack, overrides={"gke-finetune:existingCluster": existing, "gke-finetune:projectNumber": "123456789012",
                                    "gke-finetune:datasets": GATED, "gke-finetune:runs": []})
    assert len(d.of_type(SPC)) == 1, "the pods mount the token either way"
    assert [g.inputs["member"].rsplit("/", 1)[-1] for g in d.of_type(GRANT)] == ([f"{stack}-stager"] if grants else [])


@pytest.mark.parametrize("value", ["hf token", "projects/Bad/secrets/x"])
def test_a_bad_token_secret_is_refused_before_anything_is_declared(value):
    declared, err = declared_before_error("a4", overrides={"gke-finetune:hfTokenSecret": value})
    assert isinstance(err, ConfigError) and declared.resources == []
    assert any(p.startswith(f"hfTokenSecret: {value!r}") for p in err.problems), err.problems


@pytest.mark.parametrize("form, state", [({"plain": {"gke-finetune:hfToken": "hf_plain"}}, "[plain text]"),
                                         ({"secrets": {"gke-finetune:hfToken": "hf_secret"}}, "[secret]")])
@pytest.mark.parametrize("stack", ["dev", "a4"])
def test_the_retired_token_key_is_refused_in_any_stack_and_any_form(stack, form, state):
    declared, err = declared_before_error(stack, **form)
    assert isinstance(err, ConfigError) and declared.resources == []
    assert any(p.startswith(f"hfToken: '{state}'") for p in err.problems), err.problems
    assert "hf_plain" not in str(err) and "hf_secret" not in str(err)


def test_the_provider_class_check_finds_what_the_add_on_would_refuse():
    good = {"apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClass",
            "metadata": {"name": "hf-token", "namespace": "finetune"},
            "spec": {"provider": "gke", "parameters": {"secrets": "- resourceName: projects/p/secrets/s/versions/1\n"
                                                                  "  path: token\n"}}}
    assert secret_provider_class_problems(good) == []
    bad = json.loads(json.dumps(good))
    bad["spec"]["parameters"]["secrets"] = "- resourceName: projects/p/secrets/s\n  path: /etc/token\n"
    assert len(secret_provider_class_problems(bad)) == 2  # no version; a path outside the volume
    bad = json.loads(json.dumps(good))
    bad["spec"]["providr"] = bad["spec"].pop("provider")
    assert any("providr" in p for p in secret_provider_class_problems(bad))
