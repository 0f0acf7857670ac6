"""The keys of a stack for an existing cluster, and its pools' contracts, without the program."""

import pytest

from core.catalog import NODEPOOL_LABEL, QUEUED_LABEL, SPOT_LABEL
from core.names import POOL_LABEL
from stack.config import ConfigError, StackConfig

DIGEST = "us-docker.pkg.dev/p/r/gemma-jax@sha256:" + "a" * 64
BASE = {"project": "my-project-id", "region": "us-east5", "bucketName": "team-bucket", "namespace": "team-a",
        "existingCluster": {"context": "team"}, "images": {"gemma-jax": DIGEST}}


def pool(**fields):
    return {"name": "p", "accelerator": "tpu-v6e", "topology": "1x1", "nodePool": "team-tpu", **fields}


def config(**changes) -> StackConfig:
    return StackConfig.from_mapping({**BASE, **changes})


def problems(**changes) -> list[str]:
    with pytest.raises(ConfigError) as err:
        config(**changes)
    return err.value.problems


def test_an_existing_clusters_pool_is_selected_by_its_node_pool():
    c = config(pools=[pool(capacity="spot")]).contracts()["p"]
    assert c.node_selector[NODEPOOL_LABEL] == "team-tpu" and c.node_selector[SPOT_LABEL] == "true"
    assert POOL_LABEL not in c.node_selector and c.node_pool_names == ("team-tpu",)
    assert (c.pool_label, c.pool_values) == (NODEPOOL_LABEL, ("team-tpu",))


def test_a_queued_pool_of_an_existing_cluster_selects_no_label_only_the_platform_declares():
    selector = config(pools=[pool(capacity="queued")]).contracts()["p"].node_selector
    assert QUEUED_LABEL not in selector and selector[NODEPOOL_LABEL] == "team-tpu"


def test_a_platform_pool_keeps_the_platform_label():
    c = StackConfig.from_mapping({"project": "my-project-id", "region": "us-east5", "zones": ["us-east5-b"],
                                  "pools": [{"name": "p", "accelerator": "tpu-v6e", "topology": "1x1"}]})
    assert c.contracts()["p"].node_selector[POOL_LABEL] == "p" and NODEPOOL_LABEL not in c.contracts()["p"].node_selector
    assert c.existing is None


def test_a_pool_zone_is_the_platform_teams():
    assert problems(pools=[pool(zones=["us-east5-b"])]) == [
        "pools[0].zones: ['us-east5-b'] of a pool of an existing cluster; allowed: none (the node pool's locations "
        "are the platform team's)"]


def test_a_node_pool_name_is_a_gke_node_pool_name():
    assert problems(pools=[pool(nodePool="Team_TPU")]) == [
        "pools[0].nodePool: 'Team_TPU' is not a GKE node pool name; allowed: a DNS label of at most 40 characters"]


def test_the_staging_trainers_image_is_needed_too():
    dataset = {"name": "d", "url": "https://example.com/d.txt", "tokenize": "gemma3-270m"}
    found = problems(images={}, datasets=[dataset])
    assert found[0].startswith("images.gemma-jax: not set, and images can't be built for an existing cluster")


def test_grants_are_the_platform_teams_by_default_and_need_the_project_number_when_declared():
    assert config().existing.bucket_grants is False and config().existing.controllers == "install"
    granted = config(existingCluster={"context": "team", "bucketGrants": True}, projectNumber="123456789012")
    assert granted.existing.bucket_grants


def test_an_existing_cluster_takes_no_cluster_keys_at_their_defaults():
    cfg = config(clusterName="", registryName="", releaseChannel="REGULAR", systemNodeCount=1)
    assert cfg.existing.context == "team"


def test_the_controllers_are_the_stacks_default_helm_releases_unless_the_key_says_otherwise():
    from stack.controller_releases import ControllerInstall  # pylint: disable=import-outside-toplevel

    default = config(existingCluster={"context": "team", "controllers": "existing"}).existing.controller_releases
    assert (default.install("jobset"), default.install("kueue")) == (
        ControllerInstall("jobset-system", "jobset"), ControllerInstall("kueue-system", "kueue"))
    said = config(existingCluster={"context": "team", "controllers": "existing", "controllerReleases": {
        "jobset": "manifests", "kueue": "platform/queues"}}).existing.controller_releases
    assert (said.install("jobset"), said.install("kueue")) == (
        ControllerInstall("jobset-system"), ControllerInstall("platform", "queues"))
    moved = config(existingCluster={"context": "team", "controllers": "existing", "controllerReleases": {
        "kueue": "manifests:queues"}}).existing.controller_releases
    assert moved.install("kueue") == ControllerInstall("queues") and moved.install("kueue").value("kueue") == \
        "manifests:queues" and moved.install("jobset").value("jobset") == "jobset-system/jobset"


ALLOWED_RELEASE = ("allowed: <namespace>/<Helm release name> (a Helm release of the project's chart), manifests (the "
                   "project's release manifests, in {home}) or manifests:<namespace> (the release manifests in "
                   "another namespace)")


@pytest.mark.parametrize("value", [
    "jobset",  # no namespace
    "Jobset-System/jobset",  # not a namespace name
    "jobset-system/",  # no release
    "jobset-system/my_release",  # not a Helm release name
    "jobset-system/" + "r" * 54,  # Helm's 53 characters
    "manifests:",  # no namespace
    "manifests:Batch",
    "helm:jobset-system/jobset",
])
def test_a_controller_release_that_says_no_install_is_refused_naming_the_key_the_value_and_the_forms(value):
    found = problems(existingCluster={"context": "team", "controllers": "existing",
                                      "controllerReleases": {"jobset": value}})
    assert found == [f"existingCluster.controllerReleases.jobset: {value!r} does not say how jobset is installed; "
                     + ALLOWED_RELEASE.format(home="jobset-system")]


def test_controller_releases_describe_the_platform_teams_install_only():
    """With `controllers: install` the stack installs its own releases: another value would be ignored."""
    assert problems(existingCluster={"context": "team", "controllerReleases": {"kueue": "manifests"}}) == [
        "existingCluster.controllerReleases: {'jobset': 'jobset-system/jobset', 'kueue': 'manifests'} with "
        "controllers: install; allowed: no controllerReleases (the stack installs its own releases, "
        "jobset-system/jobset and kueue-system/kueue), or controllers: existing"]
    assert config(existingCluster={"context": "team", "controllerReleases": {"kueue": "kueue-system/kueue"}})
    assert problems(existingCluster={"context": "team", "controllers": "existing",
                                     "controllerReleases": {"kueue": None}}) == [
        "existingCluster.controllerReleases.kueue: null is no value; allowed: text (quote a number or a boolean "
        "to make it text)"]
