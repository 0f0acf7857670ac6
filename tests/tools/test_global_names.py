"""`make plan` refuses a stack file that claims a name another stack file of the checkout claims."""

from __future__ import annotations

import shutil

import pytest
import yaml

from stack.global_names import claimed_names
from stack import reader
from stack.reader import load_files
from tests.support.pulumi_harness import ROOT, SHIPPED_STACKS, run_stack
from tools.plan import collect as collecting
from tools.offline import EXISTING_CLUSTER_STACKS

# The name-bearing input of each Google Cloud resource type the program names itself, and the kind of
# claimed name it is (an auto-named resource, such as the router, claims nothing).
NAMED = {
    "gcp:container/cluster:Cluster": ("name", "GKE cluster"),
    "gcp:artifactregistry/repository:Repository": ("repositoryId", "Artifact Registry repository"),
    "gcp:serviceaccount/account:Account": ("accountId", "service account"),
    "gcp:storage/bucket:Bucket": ("name", "bucket"),
    "gcp:compute/network:Network": ("name", "VPC network"),
    "gcp:compute/subnetwork:Subnetwork": ("name", "subnetwork"),
    "gcp:compute/firewall:Firewall": ("name", "firewall rule"),
}


# Named within a parent the stack claims (a node pool within its cluster), or by Pulumi (a unique suffix).
SCOPED_OR_AUTO_NAMED = ("gcp:container/nodePool:NodePool", "gcp:compute/router:Router",
                        "gcp:compute/routerNat:RouterNat")
NAME_KEYS = ("name", "accountId", "repositoryId")
FOLDER = "gcp:storage/folder:Folder"


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_every_name_the_program_gives_a_google_cloud_resource_is_a_claimed_one(stack):
    """A new resource type with a name of its own fails here until stack/global_names.py claims it."""
    claimed = {(n.kind, n.name) for n in claimed_names(load_files(stack, ROOT))}
    prefixes = {name for kind, name in claimed if kind == "bucket prefix"}
    for resource in run_stack(stack).resources:
        named = resource.type.startswith("gcp:") and any(key in resource.inputs for key in NAME_KEYS)
        if resource.type == FOLDER:
            # The folder of a claimed prefix, or a parent of one: shared with the bucket's other stacks, adopted
            # where it exists (components/bucket_folders.py), never deleted.
            name = resource.inputs["name"]
            assert name in prefixes or any(p.startswith(name) for p in prefixes), (stack, name)
            continue
        if not named or resource.type in SCOPED_OR_AUTO_NAMED:
            continue
        assert resource.type in NAMED, f"{resource.type} is named but no claimed name covers it"
        key, kind = NAMED[resource.type]
        assert (kind, resource.inputs[key]) in claimed, (stack, resource.type, resource.inputs[key])


def test_the_shipped_stacks_claim_no_name_twice():
    for stack in (*SHIPPED_STACKS, *EXISTING_CLUSTER_STACKS):
        collecting.collect(stack)  # raises PlanError on a collision


def test_a_copied_stack_file_that_keeps_a_name_is_refused_naming_both_files(tmp_path):
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml", "Pulumi.a4.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    copy = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    copy["config"]["gke-finetune:clusterName"] = "finetune-dev"  # the dev stack's default
    copy["config"]["gke-finetune:bucketName"] = "my-project-id-dev-finetune"
    (tmp_path / "Pulumi.mine.yaml").write_text(yaml.safe_dump(copy))
    problems = collecting._collisions("mine", load_files("mine", tmp_path), tmp_path,
                                reader)
    assert ("Pulumi.mine.yaml and Pulumi.dev.yaml both claim GKE cluster 'finetune-dev' (project my-project-id, "
            "location us-east5)") in "\n".join(problems)
    assert any("bucket 'my-project-id-dev-finetune' (global)" in p for p in problems)
    # The same runs and datasets on the same bucket: each stack's prefixes carry its name.
    assert not [p for p in problems if "bucket prefix" in p]
    assert not [p for p in problems if "Pulumi.a4.yaml" in p]


def test_two_stacks_of_one_checkout_may_name_the_same_runs_and_datasets_on_one_bucket(tmp_path):
    for name in ("Pulumi.yaml", "Pulumi.existing-dev.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    copy = yaml.safe_load((ROOT / "Pulumi.existing-dev.yaml").read_text())
    copy["config"]["gke-finetune:namespace"] = "ml-team-b"  # same bucket, same run and dataset names
    (tmp_path / "Pulumi.team-b.yaml").write_text(yaml.safe_dump(copy))
    assert collecting._collisions("team-b", load_files("team-b", tmp_path), tmp_path, reader) == []
    mine, theirs = (claimed_names(load_files(s, tmp_path)) for s in ("team-b", "existing-dev"))
    prefixes = {n.name for n in mine if n.kind == "bucket prefix"}
    assert prefixes == {"checkpoints/team-b/gemma3-single-host/", "profiles/team-b/gemma3-single-host/",
                        "datasets/team-b/tinystories/"}
    assert not prefixes & {n.name for n in theirs}


def test_two_stacks_in_one_namespace_of_one_cluster_are_refused(tmp_path):
    for name in ("Pulumi.yaml", "Pulumi.existing-dev.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    copy = yaml.safe_load((ROOT / "Pulumi.existing-dev.yaml").read_text())
    copy["config"]["gke-finetune:runs"][0]["name"] = "another-run"
    copy["config"]["gke-finetune:datasets"][0]["name"] = "another-dataset"
    copy["config"]["gke-finetune:runs"][0]["data"] = "another-dataset"
    (tmp_path / "Pulumi.team-b.yaml").write_text(yaml.safe_dump(copy))
    problems = collecting._collisions("team-b", load_files("team-b", tmp_path), tmp_path,
                                reader)
    assert problems == ["Pulumi.team-b.yaml and Pulumi.existing-dev.yaml both claim namespace 'ml-team' (cluster of "
                        "kubeconfig context gke_my-project-id_us-east5_team-cluster): one would fail or take over the "
                        "other's; allowed: a name of the stack's own (see the stack's keys clusterName, registryName, "
                        "bucketName and namespace)"]
