"""What a trainer image is built from: its Dockerfile's COPY sources, and the content tag.

Pure Python, no Pulumi import: the image component (components/images.py), the
offline plan and the tests read the same facts. The Dockerfile and its ignore
file are the source of truth for what enters an image: `content_files` takes
the files below its COPY sources that the ignore file lets into the build
context, matched as BuildKit matches them (docker-py's port of Docker's
pattern matcher), so the tag changes exactly when something the build uses
changes (a trainer source, the Dockerfile, its ignore file, the pinned
requirements) and never otherwise: not for documentation the ignore file
keeps out, so editing a trainer's README replaces no run.
"""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from docker.utils.build import PatternMatcher

from core.trainers import TRAINERS, TrainerImage

REPO_ROOT = Path(__file__).resolve().parent.parent

# The image of every trainer, by trainer name.
TRAINER_IMAGES: dict[str, TrainerImage] = {name: row.image for name, row in TRAINERS.items()}

# How `pulumi up` builds the images (components/images.py): the local Docker engine,
# or Cloud Build for machines without one. The stack's `imageBuilder` key.
ImageBuilder = Literal["docker", "cloudbuild"]
IMAGE_BUILDERS: tuple[str, ...] = get_args(ImageBuilder)


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


def ignore_patterns(image: TrainerImage, root: Path = REPO_ROOT) -> list[str]:
    """The ignore file's patterns, as the builder reads them: blank lines and `#` comments dropped."""
    path = root / image.dockerignore
    if not path.exists():
        return []
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def content_files(image: TrainerImage, root: Path = REPO_ROOT) -> list[str]:
    """Every file the image is built from, relative to `root`, sorted.

    The Dockerfile, its ignore file, and every file below each COPY source that
    the ignore file lets into the build context. A COPY source the ignore file
    keeps out would fail the build, and is an error here too.
    """
    dockerfile = root / image.dockerfile
    files = {image.dockerfile}
    if (root / image.dockerignore).exists():
        files.add(image.dockerignore)
    # matches(path) is True for a path the ignore file keeps out of the context.
    excluded = PatternMatcher(ignore_patterns(image, root)).matches
    for source in copy_sources(parse_dockerfile(dockerfile.read_text())):
        path = root / source
        if path.is_dir():
            below = (p.relative_to(root).as_posix() for p in path.rglob("*") if p.is_file())
            sent = {rel for rel in below if not excluded(rel)}
        elif path.is_file():
            sent = set() if excluded(source) else {source}
        else:
            raise FileNotFoundError(f"{image.dockerfile} copies {source!r}, which does not exist")
        if not sent:
            raise FileNotFoundError(f"{image.dockerfile} copies {source!r}, which {image.dockerignore} "
                                    "keeps out of the build context")
        files.update(sent)
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
