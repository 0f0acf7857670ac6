"""The checkout's Python environments, each built once per content of its requirements into a cache outside
the clone and linked into the checkout (`make venvs`, `make test`; docs/development.md):

    python -m tools.venvs link .venv --python python3.11 --pip 26.3 \
        --install "requirements.txt requirements-test.txt"          # one `pip install` per --install
    python -m tools.venvs where .venv --python ... --install ...    # the cache entry those inputs make

The cache entry is ~/.cache/gke-finetune/venvs/<name>-<key> (GKE_FINETUNE_VENVS moves the cache), keyed
as e2e/tools/build.sh keys the Go tools: a hash of what decides the environment's content — the
interpreter's version and platform, the pip version, each install step's requirement files by name and
content (and the files they include with -r/-c), and pip's index settings. A fresh checkout with the same
requirements links the entry already built; a changed requirement file gives a new key, so a new entry.

A virtual environment holds its own absolute path (the scripts' shebangs, `bin/activate`), so it is built
where it stays, not renamed into place: the build holds a lock beside the entry (two checkouts on one
machine wait for each other), and writes the entry's `.installed` last. An entry without `.installed` is
a build that stopped half-way: it is never linked, and the next build removes it first.

The checkout's `.venv` becomes a symlink to the entry. A real directory there (an environment built in
place) is replaced; a symlink to somewhere outside the cache (an environment another checkout shares) is
left as it is, with a note. Standard library only: it runs before any environment exists.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

EX_CONFIG = 78
# pip's settings that change what an install resolves to (pip's documentation, "Configuration":
# every option has a PIP_<NAME> environment variable; https://pip.pypa.io/en/stable/topics/configuration/).
PIP_SETTINGS = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX", "PIP_CONSTRAINT")
# A requirements file's lines that name another file whose content counts too (pip's "Requirements File
# Format": https://pip.pypa.io/en/stable/reference/requirements-file-format/#global-options).
INCLUDES = ("-r", "--requirement", "-c", "--constraint")


class VenvError(Exception):
    """A requirement file or interpreter that cannot be used: one line, exit 78."""


class BuildFailed(Exception):
    """A step of a build failed (pip's own message above it; an index that didn't answer, say): exit 1, since
    the next make retries the build from scratch."""


def cache_root() -> Path:
    return Path(os.environ.get("GKE_FINETUNE_VENVS") or Path.home() / ".cache" / "gke-finetune" / "venvs")


@dataclass(frozen=True)
class Plan:
    """What decides one environment: its interpreter, pip and install steps (each a list of requirement files)."""

    link: Path
    python: str
    pip: str
    steps: tuple[tuple[str, ...], ...]

    @property
    def name(self) -> str:
        return self.link.name.lstrip(".") or "venv"


def _included(path: Path, seen: set[Path]) -> list[Path]:
    """`path` and every file it includes with -r/-c, depth first, each once."""
    path = path.resolve()
    if path in seen:
        return []
    if not path.is_file():
        raise VenvError(f"requirement file {path} does not exist")
    seen.add(path)
    found = [path]
    for line in path.read_text().splitlines():
        words = line.split("#", 1)[0].split()
        for option in INCLUDES:
            if words and words[0] == option and len(words) > 1:
                found += _included(path.parent / words[1], seen)
            elif words and words[0].startswith(option + "="):
                found += _included(path.parent / words[0].split("=", 1)[1], seen)
    return found


INTERPRETER_SECONDS = 60


def interpreter(python: str) -> str:
    """The interpreter's full version and platform (a pyenv shim is followed to the real interpreter)."""
    try:
        done = subprocess.run([python, "-c", "import sys, sysconfig; print(sys.version); print(sysconfig.get_platform())"],
                              capture_output=True, text=True, timeout=INTERPRETER_SECONDS)
    except OSError as error:
        raise VenvError(f"interpreter {python!r} cannot be run: {error.strerror}") from None
    except subprocess.TimeoutExpired:
        raise VenvError(f"interpreter {python!r} did not say its version within {INTERPRETER_SECONDS}s") from None
    if done.returncode != 0:
        raise VenvError(f"interpreter {python!r} exited {done.returncode}: {done.stderr.strip()[-200:]}")
    return done.stdout.strip()


def key(plan: Plan, root: Path) -> str:
    """16 hex digits of sha256 over everything that decides the environment's content."""
    digest = hashlib.sha256()

    def add(label: str, value: str | bytes) -> None:
        data = value.encode() if isinstance(value, str) else value
        digest.update(f"{label}:{len(data)}:".encode() + data + b"\n")

    add("python", interpreter(plan.python))
    add("machine", platform.machine())
    add("pip", plan.pip)
    for setting in PIP_SETTINGS:
        add(setting, os.environ.get(setting, ""))
    for number, step in enumerate(plan.steps):
        add("step", str(number))
        seen: set[Path] = set()
        for name in step:
            for path in _included(root / name, seen):
                add("file", path.relative_to(root.resolve()).as_posix() if path.is_relative_to(root.resolve())
                    else path.as_posix())
                add("content", path.read_bytes())
    return digest.hexdigest()[:16]


def entry(plan: Plan, root: Path) -> Path:
    return cache_root() / f"{plan.name}-{key(plan, root)}"


def complete(where: Path) -> bool:
    return (where / ".installed").is_file()


def _build(plan: Plan, root: Path, where: Path) -> None:
    """The environment at `where` (its final path), `.installed` written last."""
    started = time.monotonic()
    shutil.rmtree(where, ignore_errors=True)  # what a stopped build left, never linked
    python = str(where / "bin" / "python")
    commands = [[plan.python, "-m", "venv", str(where)],
                [python, "-m", "pip", "install", "-q", f"pip=={plan.pip}"]]
    for step in plan.steps:
        commands.append([python, "-m", "pip", "install", "-q", *[arg for name in step for arg in ("-r", name)]])
    for command in commands:
        if subprocess.run(command, cwd=root).returncode != 0:
            raise BuildFailed(f"{' '.join(command)} failed (see above); {where} is left incomplete and will be "
                              "rebuilt by the next make")
    record = {"python": plan.python, "pip": plan.pip, "steps": [list(step) for step in plan.steps],
              "seconds": round(time.monotonic() - started), "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (where / ".installed.tmp").write_text(json.dumps(record) + "\n")
    os.replace(where / ".installed.tmp", where / ".installed")
    print(f"venvs: {plan.link.name} built in {record['seconds']}s -> {where}", file=sys.stderr)


def ensure(plan: Plan, root: Path) -> Path:
    """The complete cache entry for `plan`, built under its lock if no complete one exists."""
    where = entry(plan, root)
    if complete(where):
        return where
    where.parent.mkdir(parents=True, exist_ok=True)
    with open(where.parent / f"{where.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the process ends, however it ends
        if not complete(where):  # another checkout may have built it while this one waited
            _build(plan, root, where)
    return where


def _points_into_cache(link: Path) -> bool:
    target = Path(os.readlink(link))
    target = target if target.is_absolute() else link.parent / target
    return target.resolve().parent == cache_root().resolve() or target.parent == cache_root()


def link(plan: Plan, root: Path) -> int:
    """Point the checkout's environment at its cache entry; 0 when it does (or is another checkout's, kept)."""
    here = root / plan.link
    if here.is_symlink() and not _points_into_cache(here):
        print(f"venvs: {plan.link} links to {os.readlink(here)}, an environment make does not manage: left as it "
              f"is (remove the link for make's own)", file=sys.stderr)
        return 0
    where = ensure(plan, root)
    if here.is_symlink() and Path(os.readlink(here)) == where:
        return 0
    if here.exists() and not here.is_symlink():
        shutil.rmtree(here)  # an environment built in place, before the cache
    staged = here.with_name(f"{here.name}.link.{os.getpid()}")
    staged.unlink(missing_ok=True)
    staged.symlink_to(where)
    os.replace(staged, here)  # one rename: the link is never missing while it changes
    print(f"venvs: {plan.link} -> {where}", file=sys.stderr)
    return 0


def parse(argv: list[str]) -> tuple[str, Plan]:
    parser = argparse.ArgumentParser(prog="python -m tools.venvs", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("link", "where"))
    parser.add_argument("link", type=Path, help="the checkout's environment path, e.g. .venv")
    parser.add_argument("--python", required=True, help="the base interpreter")
    parser.add_argument("--pip", required=True, help="the pip version the environment gets first")
    parser.add_argument("--install", action="append", required=True,
                        help="one pip install: its requirement files, separated by spaces (repeatable)")
    args = parser.parse_args(argv)
    steps = tuple(tuple(step.split()) for step in args.install)
    return args.command, Plan(args.link, args.python, args.pip, steps)


def main(argv: list[str] | None = None, root: Path | None = None) -> int:
    command, plan = parse(sys.argv[1:] if argv is None else argv)
    root = Path.cwd() if root is None else root
    try:
        if command == "where":
            print(entry(plan, root))
            return 0
        return link(plan, root)
    except VenvError as error:
        print(f"venvs: {error}", file=sys.stderr)
        return EX_CONFIG
    except BuildFailed as error:
        print(f"venvs: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
