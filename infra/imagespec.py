"""The trainer images as data: Dockerfile, what it copies, how it starts, its content tag.

Pure Python, no Pulumi import: the image component (infra/images.py), the
offline plan and the tests read the same facts. The Dockerfile is the source
of truth for what enters an image; `content_files` reads its COPY
instructions, so the tag changes exactly when something the image is built
from changes (a trainer source, the Dockerfile, its ignore file, the pinned
requirements) and never otherwise.
"""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

REPO_ROOT = Path(__file__).resolve().parent.parent

# How `pulumi up` builds the images (infra/images.py): the local Docker engine,
# or Cloud Build for machines without one. The stack's `imageBuilder` key.
ImageBuilder = Literal["docker", "cloudbuild"]
IMAGE_BUILDERS: tuple[str, ...] = get_args(ImageBuilder)

# Never hashed nor copied (the ignore files exclude them too).
_SKIPPED_PARTS = {"__pycache__"}
_SKIPPED_SUFFIXES = {".pyc", ".pyo"}


@dataclass(frozen=True)
class TrainerImage:
    """One trainer image, named like the trainer (`gemma-jax`, `trl-gpu`)."""

    trainer: str
    package: str  # the Python package copied into the image, e.g. trainers.gemma_jax
    entry_module: str  # the trainer module the launch command runs
    command: tuple[str, ...]  # the image's default command (its CMD)
    user: int  # the uid the trainer runs as in the image (0: root)
    group: int  # its primary gid (the Dockerfile's `USER <uid>:<gid>`)
    # The launcher flag that sets the number of processes per host (inserted
    # before the trainer's `-m <module>`), or None when the command has none.
    processes_flag: str | None = None

    @property
    def command_modules(self) -> tuple[str, ...]:
        """Every module the command runs with `-m` (launchers included)."""
        return tuple(self.command[i + 1] for i, w in enumerate(self.command[:-1]) if w == "-m")

    @property
    def non_root(self) -> bool:
        return self.user != 0

    def launch_command(self, processes: int) -> tuple[str, ...]:
        """The default command, with the process count per host where the launcher takes one.

        Run manifests start the trainer with this, so a pod's command and the
        image's CMD differ by that flag alone and cannot drift apart.
        """
        if self.processes_flag is None:
            return self.command
        entry = len(self.command) - 2  # `-m <entry_module>` ends the launch command
        if self.command[entry:] != ("-m", self.entry_module):
            raise ValueError(f"{self.trainer}: command {self.command} does not end with -m {self.entry_module}")
        return (*self.command[:entry], self.processes_flag, str(processes), *self.command[entry:])

    @property
    def image_name(self) -> str:
        return self.trainer

    @property
    def dockerfile(self) -> str:
        """Path of the Dockerfile, relative to the repository root (the build context)."""
        return f"docker/{self.trainer}/Dockerfile"

    @property
    def dockerignore(self) -> str:
        """BuildKit reads `<Dockerfile>.dockerignore` before the context's `.dockerignore`."""
        return f"{self.dockerfile}.dockerignore"

    @property
    def package_dir(self) -> str:
        return self.package.replace(".", "/")

    @property
    def requirements(self) -> str:
        """The pinned dependency file both the tests' environment and the image install."""
        return f"{self.package_dir}/requirements.txt"


TRAINER_IMAGES: dict[str, TrainerImage] = {
    image.trainer: image
    for image in (
        TrainerImage(
            trainer="gemma-jax",
            package="trainers.gemma_jax",
            entry_module="trainers.gemma_jax.train",
            command=("python", "-m", "trainers.gemma_jax.train"),
            # Root: GKE documents TPU device access (/dev/vfio) for root only.
            user=0,
            group=0,
        ),
        TrainerImage(
            trainer="trl-gpu",
            package="trainers.trl_gpu",
            entry_module="trainers.trl_gpu.sft",
            # `accelerate launch` behind a wrapper that keeps the trainer's exit code.
            command=(
                "python",
                "-m",
                "trainers.trl_gpu.launch",
                "--config_file",
                "trainers/trl_gpu/accelerate_fsdp_8gpu.yaml",
                "-m",
                "trainers.trl_gpu.sft",
            ),
            user=1000,
            group=1000,
            # Overrides the accelerate config file's 8 when a run uses fewer GPUs.
            processes_flag="--num_processes",
        ),
    )
}


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case, e.g. COPY
    value: str  # the rest of the (joined) line


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions of a Dockerfile, with line continuations joined and comments dropped."""
    instructions: list[Instruction] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        keyword, _, value = line.partition(" ")
        instructions.append(Instruction(keyword.upper(), value.strip()))
    if pending:
        keyword, _, value = pending.partition(" ")
        instructions.append(Instruction(keyword.upper(), value.strip()))
    return instructions


def copy_sources(instructions: list[Instruction]) -> list[str]:
    """Build-context paths the COPY/ADD instructions take (not those from other stages)."""
    sources: list[str] = []
    for ins in instructions:
        if ins.keyword not in ("COPY", "ADD"):
            continue
        words = shlex.split(ins.value)
        flags = [w for w in words if w.startswith("--")]
        if any(f.startswith("--from=") for f in flags):
            continue
        paths = [w for w in words if not w.startswith("--")]
        sources.extend(p.rstrip("/") or "." for p in paths[:-1])
    return sources


def _skipped(path: Path) -> bool:
    return bool(_SKIPPED_PARTS.intersection(path.parts)) or path.suffix in _SKIPPED_SUFFIXES


def content_files(image: TrainerImage, root: Path = REPO_ROOT) -> list[str]:
    """Every file the image is built from, relative to `root`, sorted.

    The Dockerfile, its ignore file, and every file below each COPY source.
    """
    dockerfile = root / image.dockerfile
    files = {image.dockerfile}
    if (root / image.dockerignore).exists():
        files.add(image.dockerignore)
    for source in copy_sources(parse_dockerfile(dockerfile.read_text())):
        path = root / source
        if path.is_dir():
            files.update(
                p.relative_to(root).as_posix()
                for p in path.rglob("*")
                if p.is_file() and not _skipped(p.relative_to(root))
            )
        elif path.is_file():
            files.add(source)
        else:
            raise FileNotFoundError(f"{image.dockerfile} copies {source!r}, which does not exist")
    return sorted(files)


def content_hash(image: TrainerImage, root: Path = REPO_ROOT) -> str:
    """SHA-256 over the path and bytes of every file the image is built from."""
    digest = hashlib.sha256()
    for rel in content_files(image, root):
        digest.update(rel.encode() + b"\0")
        digest.update((root / rel).read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def content_tag(image: TrainerImage, root: Path = REPO_ROOT) -> str:
    """The image tag: `src-` and the first 16 hex digits of the content hash."""
    return f"src-{content_hash(image, root)[:16]}"
