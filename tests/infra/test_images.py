"""Image tags follow the content of what an image is built from, and nothing else;
the image component builds, pushes and exposes each trainer image by digest."""

from __future__ import annotations

import shutil
from pathlib import Path

import pulumi
import pytest

from core.dockerfile import REPO_ROOT, TRAINER_IMAGES, content_files, content_tag

JAX = TRAINER_IMAGES["gemma-jax"]
GPU = TRAINER_IMAGES["trl-gpu"]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of what the images are built from, plus files that are not."""
    for rel in ("docker", "trainers"):
        shutil.copytree(REPO_ROOT / rel, tmp_path / rel, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "README.md").write_text("docs\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("def test(): pass\n")
    return tmp_path


def _touch(path: Path, text: str = "\n# changed\n") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(text)


def test_tag_is_deterministic(tree):
    assert content_tag(JAX, tree) == content_tag(JAX, tree)
    assert content_tag(JAX, tree).startswith("src-") and len(content_tag(JAX, tree)) == 20
    assert content_tag(JAX, tree) != content_tag(GPU, tree)


def test_tag_of_the_real_tree_covers_dockerfile_requirements_and_shared_modules():
    for image in TRAINER_IMAGES.values():
        files = content_files(image)
        for rel in (image.dockerfile, image.dockerignore, image.requirements,
                    "trainers/__init__.py", "trainers/exit_codes.py"):
            assert rel in files, (image.trainer, rel)
        assert all(f.startswith(("docker/", "trainers/")) for f in files)
        assert not any("__pycache__" in f or f.endswith(".pyc") for f in files)


@pytest.mark.parametrize(
    "changed, jax_changes, gpu_changes",
    [
        ("trainers/gemma_jax/__init__.py", True, False),
        ("trainers/gemma_jax/new_module.py", True, False),  # a file added to the package
        ("trainers/gemma_jax/requirements.txt", True, False),
        ("docker/gemma-jax/Dockerfile", True, False),
        ("docker/gemma-jax/Dockerfile.dockerignore", True, False),
        ("trainers/trl_gpu/__init__.py", False, True),
        ("docker/trl-gpu/Dockerfile", False, True),
        ("trainers/exit_codes.py", True, True),  # shared by both images
        ("trainers/__init__.py", True, True),
        ("README.md", False, False),
        ("tests/test_x.py", False, False),
        ("docker/cloudbuild.yaml", False, False),
        ("trainers/gemma_jax/__pycache__/data.cpython-312.pyc", False, False),
    ],
)
def test_tag_changes_exactly_when_an_image_input_changes(tree, changed, jax_changes, gpu_changes):
    before = {i.trainer: content_tag(i, tree) for i in (JAX, GPU)}
    _touch(tree / changed)
    after = {i.trainer: content_tag(i, tree) for i in (JAX, GPU)}
    assert (before["gemma-jax"] != after["gemma-jax"]) is jax_changes
    assert (before["trl-gpu"] != after["trl-gpu"]) is gpu_changes


def test_renaming_a_source_changes_the_tag(tree):
    before = content_tag(JAX, tree)
    (tree / "trainers/gemma_jax/__init__.py").rename(tree / "trainers/gemma_jax/renamed.py")
    assert content_tag(JAX, tree) != before


def test_a_missing_copy_source_is_an_error(tree):
    shutil.rmtree(tree / "trainers/gemma_jax")
    with pytest.raises(FileNotFoundError, match="trainers/gemma_jax"):
        content_tag(JAX, tree)


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

RUN = {"name": "gemma3", "trainer": "gemma-jax", "pool": "v6e-1x1", "data": "tinystories/train.txt"}


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


def test_a_stack_without_runs_builds_no_image():
    from tools.offline import run_stack

    assert not run_stack("dev", overrides={"gke-finetune:runs": []}).of_type("docker-build:index:Image")


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
