"""The image component builds, pushes and exposes each trainer image by digest."""

from __future__ import annotations

import pulumi
import pytest

from core.dockerfile import REPO_ROOT, TRAINER_IMAGES, content_tag

JAX = TRAINER_IMAGES["gemma-jax"]
GPU = TRAINER_IMAGES["trl-gpu"]


# --- the Pulumi component, under the SDK's mocks -------------------------------------

DIGEST = "sha256:" + "ab" * 32
REGISTRY = "us-east1-docker.pkg.dev/my-project/trainers"


class _Mocks(pulumi.runtime.Mocks):
    def __init__(self):
        self.resources: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args):
        self.resources.append(args)
        outputs = dict(args.inputs)
        if args.typ == "docker-build:index:Image":
            outputs["digest"] = DIGEST
        if args.typ == "command:local:Command":
            outputs["stdout"] = DIGEST + "\n"
        return f"{args.name}-id", outputs

    def call(self, args):
        return {}


@pytest.fixture
def mocks(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)  # the CLI runs the program in the project directory
    m = _Mocks()
    pulumi.runtime.set_mocks(m, project="gke-finetune", stack="test", preview=False)
    return m


@pulumi.runtime.test
def test_docker_builder_pushes_each_trainer_by_content_tag_and_exposes_digests(mocks):
    from components.images import TrainerImages, TrainerImagesArgs

    images = TrainerImages("images", TrainerImagesArgs(registry_url=REGISTRY))

    def check(refs):
        built = {r.name: r for r in mocks.resources if r.typ == "docker-build:index:Image"}
        assert set(built) == {"images-gemma-jax", "images-trl-gpu"}
        for trainer, image in TRAINER_IMAGES.items():
            inputs = built[f"images-{trainer}"].inputs
            assert inputs["push"] is True
            assert inputs["tags"] == [f"{REGISTRY}/{trainer}:{content_tag(image)}"]
            # relative to the project directory, so another checkout plans the same inputs
            assert inputs["context"]["location"] == "."
            assert inputs["dockerfile"]["location"] == image.dockerfile
            assert inputs["platforms"] == ["linux/amd64"]
            assert inputs["buildOnPreview"] is False
            assert refs[trainer] == f"{REGISTRY}/{trainer}@{DIGEST}"
        components = [r for r in mocks.resources if r.typ == "gke-finetune:platform:TrainerImages"]
        assert [c.name for c in components] == ["images"]

    urns = [b.urn for b in images.builds.values()]
    return pulumi.Output.all(refs=pulumi.Output.all(**images.refs), urns=pulumi.Output.all(*urns)).apply(
        lambda a: (check(a["refs"]), _parented(a["urns"]))
    )


def _parented(urns):
    # children of the component carry its type in their URN's type chain
    for urn in urns:
        assert "::gke-finetune:platform:TrainerImages$" in urn, urn


@pulumi.runtime.test
def test_cloudbuild_builder_runs_gcloud_with_the_content_tag_as_trigger(mocks):
    from components.images import TrainerImages, TrainerImagesArgs

    images = TrainerImages(
        "images",
        TrainerImagesArgs(
            registry_url=REGISTRY, builder="cloudbuild", project="my-project", region="us-east1",
            trainers=["trl-gpu"],
        ),
    )

    def check(refs):
        assert not [r for r in mocks.resources if r.typ == "docker-build:index:Image"]
        (cmd,) = [r for r in mocks.resources if r.typ == "command:local:Command"]
        tag = content_tag(GPU)
        assert cmd.inputs["triggers"] == [tag]
        create = cmd.inputs["create"]
        assert "gcloud builds submit . " in create
        assert "--config=docker/cloudbuild.yaml" in create
        assert f"_IMAGE={REGISTRY}/trl-gpu:{tag},_DOCKERFILE=docker/trl-gpu/Dockerfile" in create
        assert f"gcloud artifacts docker images describe {REGISTRY}/trl-gpu:{tag}" in create
        assert cmd.inputs["dir"] == "."
        assert refs == {"trl-gpu": f"{REGISTRY}/trl-gpu@{DIGEST}"}

    return pulumi.Output.all(**images.refs).apply(check)


def test_cloudbuild_builder_needs_project_and_region(mocks):
    from components.images import TrainerImages, TrainerImagesArgs

    with pytest.raises(ValueError, match="project and region"):
        TrainerImages("images", TrainerImagesArgs(registry_url=REGISTRY, builder="cloudbuild"))


def test_digest_ref_is_empty_until_the_digest_is_known():
    from components.images import digest_ref

    assert digest_ref(REGISTRY, "trl-gpu", "") == ""
    assert digest_ref(REGISTRY, "trl-gpu", DIGEST + "\n") == f"{REGISTRY}/trl-gpu@{DIGEST}"


# --- wiring: runs get built images unless the stack pins them ----------------------------

RUN = {"name": "gemma3", "trainer": "gemma-jax", "pool": "v6e-1x1", "data": "tinystories/train.txt",
       "args": ["--batch_size", "64"]}  # what one v6e chip holds


def _jobset_images(deployment) -> list[str]:
    import json
    import re

    (jobset,) = deployment.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")
    return re.findall(r'"image": "([^"]+)"', json.dumps(jobset.inputs))


def test_runs_use_the_image_built_from_the_repository_by_digest(monkeypatch):
    from tools.offline import run_stack

    monkeypatch.chdir(REPO_ROOT)
    deployment = run_stack("dev", overrides={"gke-finetune:runs": [RUN]})
    (build,) = deployment.of_type("docker-build:index:Image")
    assert build.name == "images-gemma-jax"  # only the trainers the runs need
    assert build.inputs["tags"] == [
        f"{deployment.outputs['registryUrl']}/gemma-jax:{content_tag(JAX)}"
    ]
    ref = deployment.outputs["images"]["gemma-jax"]
    assert ref.startswith(f"{deployment.outputs['registryUrl']}/gemma-jax@sha256:")
    assert _jobset_images(deployment) == [ref]


def test_images_pinned_in_the_stack_file_are_not_built(monkeypatch):
    from tools.offline import run_stack

    monkeypatch.chdir(REPO_ROOT)
    pinned = "us-docker.pkg.dev/other/images/gemma-jax@sha256:" + "0" * 64
    deployment = run_stack(
        "dev", overrides={"gke-finetune:runs": [RUN], "gke-finetune:images": {"gemma-jax": pinned}}
    )
    assert not deployment.of_type("docker-build:index:Image")
    assert not deployment.of_type("gke-finetune:platform:TrainerImages")
    assert _jobset_images(deployment) == [pinned]


def test_a_stack_without_runs_or_datasets_builds_no_image():
    from tools.offline import run_stack

    empty = {"gke-finetune:runs": [], "gke-finetune:datasets": []}
    assert not run_stack("dev", overrides=empty).of_type("docker-build:index:Image")
    # A dataset alone needs an image: its staging Job runs in one.
    staging = run_stack("dev", overrides={"gke-finetune:runs": []}).of_type("docker-build:index:Image")
    assert [i.name for i in staging] == ["images-gemma-jax"]


def test_the_stack_s_image_builder_chooses_cloud_build_in_its_project_and_region(monkeypatch):
    from tools.offline import run_stack

    monkeypatch.chdir(REPO_ROOT)
    deployment = run_stack(
        "dev", overrides={"gke-finetune:runs": [RUN], "gke-finetune:imageBuilder": "cloudbuild"}
    )
    assert not deployment.of_type("docker-build:index:Image")
    (build,) = deployment.of_type("command:local:Command")
    assert build.name == "images-gemma-jax"
    assert "gcloud builds submit" in build.inputs["create"]
    assert "--project=my-project-id --region=us-east5" in build.inputs["create"]
    assert build.inputs["triggers"] == [content_tag(JAX)]
    assert _jobset_images(deployment) == [deployment.outputs["images"]["gemma-jax"]]


def test_the_default_image_builder_is_the_local_docker_engine():
    from stack.config import StackConfig

    assert StackConfig.from_mapping({"project": "my-project-id", "region": "us-east5"}).image_builder == "docker"


# --- imageBuild: another registry, the build's network and builder; unset, nothing changes -----

def test_without_image_build_the_image_inputs_are_the_ones_a_real_stack_always_had(monkeypatch):
    from tools.offline import run_stack

    monkeypatch.chdir(REPO_ROOT)
    (build,) = run_stack("dev", overrides={"gke-finetune:runs": [RUN]}).of_type("docker-build:index:Image")
    assert build.inputs["network"] == "default" and "builder" not in build.inputs  # the SDK's own default
    assert "exec" not in build.inputs


def test_image_build_names_the_registry_the_network_and_the_builder(monkeypatch):
    from tools.offline import run_stack

    monkeypatch.chdir(REPO_ROOT)
    settings = {"registry": "127.0.0.1:5000/finetune", "network": "host", "builder": "default", "exec": True}
    deployment = run_stack("dev", overrides={"gke-finetune:runs": [RUN], "gke-finetune:imageBuild": settings})
    (build,) = deployment.of_type("docker-build:index:Image")
    assert build.inputs["tags"] == [f"127.0.0.1:5000/finetune/gemma-jax:{content_tag(JAX)}"]
    assert build.inputs["network"] == "host" and build.inputs["builder"] == {"name": "default"}
    assert build.inputs["exec"] is True
    ref = deployment.outputs["images"]["gemma-jax"]
    assert ref.startswith("127.0.0.1:5000/finetune/gemma-jax@sha256:") and _jobset_images(deployment) == [ref]


def test_an_existing_cluster_stack_with_a_registry_builds_and_pushes_there(monkeypatch):
    from tools.offline import run_stack

    monkeypatch.chdir(REPO_ROOT)
    deployment = run_stack("existing-dev", overrides={"gke-finetune:images": {},
                                                      "gke-finetune:imageBuild": {"registry": "127.0.0.1:5000/e2e"}})
    (build,) = deployment.of_type("docker-build:index:Image")
    assert build.name == "images-gemma-jax" and build.inputs["push"] is True
    ref = deployment.outputs["images"]["gemma-jax"]
    assert ref.startswith("127.0.0.1:5000/e2e/gemma-jax@sha256:") and set(_jobset_images(deployment)) == {ref}
