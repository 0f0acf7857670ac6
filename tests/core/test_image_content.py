"""Image tags follow the content of what an image is built from, and nothing else."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from core.dockerfile import REPO_ROOT, TRAINER_IMAGES, content_files, content_tag
from core.trainers import SHARED_MODULES

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
        for rel in (image.dockerfile, image.dockerignore, image.requirements, *SHARED_MODULES):
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
        ("trainers/progress.py", True, True),
        ("trainers/__init__.py", True, True),
        ("README.md", False, False),
        ("tests/test_x.py", False, False),
        ("docker/cloudbuild.yaml", False, False),
        ("trainers/gemma_jax/__pycache__/data.cpython-312.pyc", False, False),
        # Documentation beside the code: the ignore files keep it out of the build.
        ("trainers/gemma_jax/README.md", False, False),
        ("trainers/trl_gpu/README.md", False, False),
        ("trainers/staging/NOTES.md", False, False),
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


def test_the_ignore_file_decides_what_is_hashed(tree):
    """A file below a COPY source that the ignore file keeps out is neither sent nor hashed."""
    assert "trainers/gemma_jax/agree.py" in content_files(JAX, tree)
    before = content_tag(JAX, tree)
    _touch(tree / JAX.dockerignore, "trainers/gemma_jax/agree.py\n")
    assert "trainers/gemma_jax/agree.py" not in content_files(JAX, tree)
    assert content_tag(JAX, tree) != before  # the ignore file itself is an input
    changed = content_tag(JAX, tree)
    _touch(tree / "trainers/gemma_jax/agree.py")
    assert content_tag(JAX, tree) == changed


def test_the_readmes_are_not_image_content():
    for image in TRAINER_IMAGES.values():
        assert not [f for f in content_files(image) if f.endswith(".md")], image.trainer


def test_a_copy_source_the_ignore_file_keeps_out_is_an_error(tree):
    _touch(tree / JAX.dockerignore, "trainers/exit_codes.py\n")
    with pytest.raises(FileNotFoundError, match="trainers/exit_codes.py.*keeps out of the build context"):
        content_tag(JAX, tree)
