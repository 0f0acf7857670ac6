"""The trainer Dockerfiles, read as text: pinned bases, what they copy, how they start.

No Docker engine is needed: these checks hold the Dockerfiles to the same
facts the tests' environments are built from (Makefile, requirements files).
"""

from __future__ import annotations

import ast
import json
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.dockerfile import (
    REPO_ROOT,
    TRAINER_IMAGES,
    TrainerImage,
    content_files,
    copy_sources,
    parse_dockerfile,
)
from core.trainers import SHARED_MODULES

IMAGES = list(TRAINER_IMAGES.values())
ids = [i.trainer for i in IMAGES]

# Makefile environment of each trainer: (venv variable, interpreter variable).
MAKE_ENVS = {"gemma-jax": ("VENV_JAX", "PY312"), "trl-gpu": ("VENV_GPU", "PY311")}
# The package whose version selects the accelerator build in each image.
ACCELERATOR_PIN = {"gemma-jax": "jax", "trl-gpu": "torch"}


def _instructions(image: TrainerImage):
    return parse_dockerfile((REPO_ROOT / image.dockerfile).read_text())


def _values(image: TrainerImage, keyword: str) -> list[str]:
    return [i.value for i in _instructions(image) if i.keyword == keyword]


def _makefile() -> str:
    return (REPO_ROOT / "Makefile").read_text()


def _make(*args: str) -> str:
    return subprocess.run(["make", "-s", "--no-print-directory", *args], cwd=REPO_ROOT, check=True,
                          capture_output=True, text=True).stdout


def _make_var(name: str) -> str:
    """A Makefile variable as make expands it."""
    return _make("--eval", "print-var-%: ; @echo $($*)", f"print-var-{name}").strip()


@dataclass(frozen=True)
class InstallRule:
    """How make builds a trainer's test environment: the rule's prerequisites (a change rebuilds it), the
    interpreter it is created with and each `pip install` step's requirement files (tools/venvs.py)."""

    prerequisites: list[str]
    python: str
    installs: list[list[str]]


def _install_rule(image: TrainerImage) -> InstallRule:
    """The rule that builds the trainer's test environment, read from make itself: its prerequisites
    expanded, and the command its recipe runs (`make -n -B`: printed, not run)."""
    venv, _ = MAKE_ENVS[image.trainer]
    match = re.search(rf"^\$\({venv}\)/\.installed:(.*)$", _makefile(), re.M)
    assert match, f"no $({venv})/.installed rule in the Makefile"
    prerequisites = [word for part in match.group(1).split()
                     for word in (_make_var(part[2:-1]).split() if part.startswith("$(") else [part])]
    argv = shlex.split(_make("-n", "-B", f"{_make_var(venv)}/.installed").strip())
    assert argv[1:4] == ["-m", "tools.venvs", "link"], argv
    installs = [argv[i + 1].split() for i, arg in enumerate(argv) if arg == "--install"]
    return InstallRule(prerequisites, argv[argv.index("--python") + 1], installs)


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)(\[[^\]]*\])?==([A-Za-z0-9_.+!-]+)", line)
        assert match, f"{path}: {line!r} is not an exact pin (name==version)"
        pins[match.group(1).lower().replace("_", "-")] = match.group(3)
    return pins


@pytest.mark.parametrize("image", IMAGES, ids=ids)
def test_base_images_are_pinned(image):
    bases = _values(image, "FROM")
    assert bases, f"{image.dockerfile} has no FROM"
    for base in bases:
        ref = base.split()[0]
        assert "latest" not in ref
        name, _, digest = ref.partition("@")
        if digest:
            assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), ref
            continue
        _, _, tag = name.rpartition(":")
        # An exact version tag: at least major.minor.patch, never a moving alias.
        assert re.match(r"^\d+\.\d+\.\d+", tag), f"{ref}: pin an exact version tag or a digest"


@pytest.mark.parametrize("image", IMAGES, ids=ids)
def test_python_matches_the_test_environment(image):
    """The image's Python minor version is the one its test environment is created with."""
    base = _values(image, "FROM")[-1].split()[0]
    image_minor = re.match(r".*python:(\d+\.\d+)\.", base).group(1)
    _, interpreter = MAKE_ENVS[image.trainer]
    assert _install_rule(image).python == _make_var(interpreter)
    assert interpreter == "PY" + image_minor.replace(".", "")


@pytest.mark.parametrize("image", IMAGES, ids=ids)
def test_pip_matches_the_test_environment(image):
    pip = re.search(r"^PIP_VERSION := (\S+)", _makefile(), re.M).group(1)
    runs = " ".join(_values(image, "RUN"))
    assert f"pip install pip=={pip}" in runs


@pytest.mark.parametrize("image", IMAGES, ids=ids)
def test_installs_the_requirements_the_tests_install(image):
    """The Dockerfile installs the very file `make test` installs, and it is fully pinned."""
    copies = copy_sources(_instructions(image))
    assert image.requirements in copies
    rule = _install_rule(image)
    assert any(image.requirements in step for step in rule.installs)
    assert image.requirements in rule.prerequisites, "the environment must rebuild when it changes"
    runs = " ".join(_values(image, "RUN"))
    assert "pip install -r /tmp/requirements.txt" in runs
    pins = _pins(REPO_ROOT / image.requirements)
    assert ACCELERATOR_PIN[image.trainer] in pins


def _shell_extract(image: TrainerImage) -> re.Pattern:
    """The `sed -E` expression the Dockerfile uses to read the accelerator pin, as a regex."""
    runs = " ".join(_values(image, "RUN"))
    expr = re.search(r"sed -n -E 's/(.*?)/\\(\d)/p'", runs)
    assert expr, "the accelerator version is read from the requirements file with sed -E"
    return re.compile(expr.group(1)), int(expr.group(2))


@pytest.mark.parametrize("image", IMAGES, ids=ids)
def test_accelerator_build_is_the_pinned_version(image):
    """The TPU runtime / CUDA torch is installed at exactly the version the tests pin."""
    pattern, group = _shell_extract(image)
    pinned = _pins(REPO_ROOT / image.requirements)[ACCELERATOR_PIN[image.trainer]]
    found = [
        m.group(group)
        for line in (REPO_ROOT / image.requirements).read_text().splitlines()
        if (m := pattern.match(line))
    ]
    assert found == [pinned]
    runs = " ".join(_values(image, "RUN"))
    if image.trainer == "gemma-jax":
        assert '"jax[tpu]==${JAX_VERSION}"' in runs
    else:
        # One source for tests and image: the package index's torch, itself the CUDA 13.0 build
        # (the tests' environment has the same wheel); no other index, and the build checks the CUDA.
        assert "pip install -r /tmp/requirements.txt" in runs
        assert "--index-url" not in runs and not _values(image, "ARG")
        assert "torch.version.cuda" in runs and "startswith('13.')" in runs


@pytest.mark.parametrize("image", IMAGES, ids=ids)
def test_default_command_is_the_launch_command(image):
    cmd = _values(image, "CMD")
    assert len(cmd) == 1
    assert tuple(json.loads(cmd[0])) == image.command  # exec form, no shell
    assert image.entry_module in image.command
    assert _values(image, "WORKDIR")[-1] == "/app"


@pytest.mark.parametrize("image", IMAGES, ids=ids)
def test_runs_as_the_documented_user(image):
    users = _values(image, "USER")
    uid, _, gid = users[-1].partition(":") if users else ("0", "", "0")
    assert int(uid) == image.user
    # The pods' runAsGroup/fsGroup and the FUSE mounts' gid come from image.group,
    # so a non-root image names its group explicitly (`USER <uid>:<gid>`).
    assert int(gid) == image.group if image.user else image.group == 0
    if image.user:
        assert f"useradd --uid {image.user}" in " ".join(_values(image, "RUN"))


@pytest.mark.parametrize("image", IMAGES, ids=ids)
def test_the_image_has_the_non_root_account_its_staging_jobs_run_as(image):
    """manifests/staging.py runs a staging Job as `jobs_user`, uid and gid alike (`--user-group`)."""
    assert image.jobs_user, image.trainer
    assert f"useradd --uid {image.jobs_user} --user-group" in " ".join(_values(image, "RUN"))


@pytest.mark.parametrize("image", IMAGES, ids=ids)
def test_context_is_only_what_the_image_needs(image):
    """The ignore file lets through exactly the paths the Dockerfile copies."""
    lines = [
        line.strip()
        for line in (REPO_ROOT / image.dockerignore).read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*"
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    copied = set(copy_sources(_instructions(image)))
    also = {m.replace(".", "/") for m in (*image.also_runs, *image.shared_packages)}
    assert allowed == {*SHARED_MODULES, image.package_dir, *also}
    for source in copied:
        assert any(source == a or source.startswith(a + "/") for a in allowed), source


def _module_file(module: str, root: Path = REPO_ROOT) -> Path | None:
    base = root / module.replace(".", "/")
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _local_imports(path: Path, module: str) -> set[str]:
    """Modules under `trainers` that a file imports (absolute or relative)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                prefix = f"{base}.{node.module}" if node.module else base
            else:
                prefix = node.module or ""
            names = [prefix] + [f"{prefix}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            if name == "trainers" or name.startswith("trainers."):
                # the module itself and every package on its way
                parts = name.split(".")
                found.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return found


def imported_files(entry_module: str, root: Path = REPO_ROOT) -> set[str]:
    """Every file under trainers/ reached by walking imports from the entry module."""
    seen: set[str] = set()
    files: set[str] = set()
    todo = [entry_module]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        path = _module_file(module, root)
        if path is None:
            continue  # a name imported from a module (from x import func), not a module
        files.add(path.relative_to(root).as_posix())
        todo.extend(_local_imports(path, module))
    return files


@pytest.mark.parametrize("image", IMAGES, ids=ids)
def test_every_imported_module_is_copied(image):
    assert image.entry_module in image.command_modules
    needed: set[str] = set()
    for module in image.command_modules:  # the trainer and any launcher in front of it
        assert _module_file(module), f"{module}, run by the image's command, does not exist"
        needed |= imported_files(module)
        assert _module_file(module).relative_to(REPO_ROOT).as_posix() in needed
    assert "trainers/__init__.py" in needed
    for module in image.also_runs:  # run by the stack's staging Jobs in this image
        assert _module_file(module), module
        needed |= imported_files(module) | imported_files(f"{module}.__main__")
    in_image = set(content_files(image))
    assert needed <= in_image, sorted(needed - in_image)


@pytest.mark.parametrize("image", IMAGES, ids=ids)
def test_files_the_command_names_are_copied(image):
    """Paths in the launch command (the accelerate config) exist and are in the image."""
    in_image = set(content_files(image))
    for word in image.command:
        if "/" in word:
            assert (REPO_ROOT / word).is_file(), word
            assert word in in_image, word


def test_import_walk_follows_relative_and_shared_imports(tmp_path):
    """The walk itself: relative imports, `from pkg import module`, and stdlib left out."""
    pkg = tmp_path / "trainers" / "demo"
    pkg.mkdir(parents=True)
    (tmp_path / "trainers" / "__init__.py").write_text("")
    (tmp_path / "trainers" / "exit_codes.py").write_text("OK = 0\n")
    (pkg / "__init__.py").write_text("")
    (pkg / "main.py").write_text(
        "import os\nfrom . import data\nfrom .model import build\nfrom trainers import exit_codes\n"
    )
    (pkg / "data.py").write_text("from trainers.demo.util import helper\n")
    (pkg / "model.py").write_text("")
    (pkg / "util.py").write_text("def helper(): pass\n")
    (pkg / "unused.py").write_text("")
    assert imported_files("trainers.demo.main", tmp_path) == {
        "trainers/__init__.py",
        "trainers/exit_codes.py",
        "trainers/demo/__init__.py",
        "trainers/demo/main.py",
        "trainers/demo/data.py",
        "trainers/demo/model.py",
        "trainers/demo/util.py",
    }


def test_the_tpu_image_installs_the_compiler_the_tests_compile_with():
    """libtpu is pinned once (trainers/gemma_jax/requirements-tpu.txt): the TPU
    image installs that file with jax[tpu], and the JAX test environment
    installs it too (tests/gemma_jax/test_compiled_hbm.py compiles with it)."""
    image = TRAINER_IMAGES["gemma-jax"]
    pinned = "trainers/gemma_jax/requirements-tpu.txt"
    assert "libtpu" in _pins(REPO_ROOT / pinned)
    assert pinned in copy_sources(_instructions(image))
    runs = " ".join(_values(image, "RUN"))
    assert re.search(r"pip install -r /tmp/requirements\.txt -r /tmp/requirements-tpu\.txt \"jax\[tpu\]", runs)
    rule = _install_rule(image)
    assert any(pinned in step for step in rule.installs) and pinned in rule.prerequisites
