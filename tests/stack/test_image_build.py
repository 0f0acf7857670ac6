"""`imageBuild`: where built trainer images go and how they build; a stack without it is unchanged."""

import pytest

from stack.config import ConfigError, StackConfig
from stack.images import UNBUILT_DIGEST, offline_images

PLATFORM = {"project": "my-project-id", "region": "us-east5", "zones": ["us-east5-b"],
            "pools": [{"name": "v6e", "accelerator": "tpu-v6e", "topology": "1x1"}],
            "runs": [{"name": "r", "trainer": "gemma-jax", "pool": "v6e", "data": "d/train.txt"}],
            "datasets": [{"name": "d", "url": "https://example.com/train.txt"}]}
EXISTING = {"project": "my-project-id", "region": "us-east5", "bucketName": "team-bucket",
            "existingCluster": {"context": "team"}, "namespace": "team-a",
            "pools": [{"name": "v6e", "accelerator": "tpu-v6e", "topology": "1x1", "nodePool": "team-tpu"}],
            "runs": [{"name": "r", "trainer": "gemma-jax", "pool": "v6e", "data": "d/train.txt"}],
            "datasets": [{"name": "d", "url": "https://example.com/train.txt"}]}


def problems(base: dict, **image_build) -> list[str]:
    with pytest.raises(ConfigError) as err:
        StackConfig.from_mapping({**base, "imageBuild": image_build})
    return err.value.problems


def test_unset_it_changes_nothing():
    cfg = StackConfig.from_mapping(PLATFORM)
    assert (cfg.image_build.registry, cfg.image_build.network, cfg.image_build.builder) == ("", "default", "")
    assert cfg.image_build.exec is False
    assert offline_images(cfg) == {
        # the registry a stack declares is named after it: finetune-<stack>, the stack "dev" here
        "gemma-jax": f"us-east5-docker.pkg.dev/my-project-id/finetune-dev/gemma-jax@{UNBUILT_DIGEST}"}


def test_a_registry_of_its_own_is_where_the_built_images_go():
    cfg = StackConfig.from_mapping({**PLATFORM, "imageBuild": {"registry": "127.0.0.1:5000/finetune",
                                                               "network": "host", "builder": "default"}})
    assert offline_images(cfg) == {"gemma-jax": f"127.0.0.1:5000/finetune/gemma-jax@{UNBUILT_DIGEST}"}


@pytest.mark.parametrize("registry", ["127.0.0.1:5000", "Registry.example/Trainers", "host:port/x", "a/b c",
                                      "https://registry.example/x"])
def test_a_registry_is_a_repository_address(registry):
    (found,) = problems(PLATFORM, registry=registry)
    assert found.startswith(f"imageBuild.registry: {registry!r} is not a registry repository address; allowed: ")


def test_the_network_is_the_builder_s_or_the_host_s():
    assert problems(PLATFORM, network="bridge") == [
        "imageBuild.network: 'bridge' is not a build network; allowed: default | host"]


def test_a_builder_is_a_buildx_builder_name():
    (found,) = problems(PLATFORM, builder="my builder")
    assert found.startswith("imageBuild.builder: 'my builder' is not a buildx builder name")


def test_an_existing_cluster_stack_builds_its_images_when_it_names_a_registry():
    (found,) = problems(EXISTING)
    assert found.startswith("images.gemma-jax: not set, and images can't be built for an existing cluster without "
                            "imageBuild.registry")
    cfg = StackConfig.from_mapping({**EXISTING, "imageBuild": {"registry": "127.0.0.1:5000/finetune"}})
    assert offline_images(cfg) == {"gemma-jax": f"127.0.0.1:5000/finetune/gemma-jax@{UNBUILT_DIGEST}"}


def test_exec_is_a_boolean():
    (found,) = problems(PLATFORM, exec="yes")
    assert found.startswith("imageBuild.exec: 'yes'"), found
