"""How the commands write files a person owns: only their own, whole or not at all.

- `replace_text`: a file replaced atomically (a temporary file beside it, flushed, renamed over it: a reader
  sees the old file or the new one, never half of either; rename(2) replaces atomically within a file
  system, https://man7.org/linux/man-pages/man2/rename.2.html), with the old file's mode.
- `locked`: one writer at a time in a directory (flock(2) on the directory itself, so no lock file is left
  behind; the lock goes with the process, https://man7.org/linux/man-pages/man2/flock.2.html). Two
  `make cancel` at once: the second reads the file once the first has written it, so both edits land.
- `OwnedFiles`: an output folder's files that a command wrote, listed in a manifest of its own
  (`.gke-finetune-files`): a later run removes only those it no longer writes, and never writes over a
  file it did not write; the user's other files stay as they are.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

MANIFEST = ".gke-finetune-files"
EX_CANTCREAT = 73  # sysexits.h: a file the command must write can't be written


class WriteRefused(Exception):
    """A file the command would write is not its own, or can't be written; nothing was changed."""

    code = EX_CANTCREAT


@contextlib.contextmanager
def locked(directory: Path) -> Iterator[None]:
    """An exclusive lock on `directory` for as long as the block runs (waits for another holder)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def check_writable(path: Path) -> None:
    """WriteRefused when `path` is read-only (no write bit: the user made it so, even for root) or its folder
    takes no new file."""
    mode = path.stat().st_mode
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(path, os.W_OK):
        raise WriteRefused(f"{path.name} is read-only; nothing was changed (make it writable: chmod u+w {path})")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise WriteRefused(f"{path.parent} takes no new file (the edit is written beside {path.name}, then renamed "
                           "over it); nothing was changed")


def replace_text(path: Path, text: str) -> None:
    """`path`'s content replaced by `text` (UTF-8, line endings as given) in one rename, its mode kept."""
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


class OwnedFiles:
    """The files a command keeps in an output folder, by the manifest it writes there."""

    def __init__(self, folder: Path, adopt: bool = False):
        """`adopt`: a folder the command owns whole (its default output, e.g. plan/<stack>/manifests) whose
        files predate the manifest are taken as its own."""
        self.folder = folder
        self.path = folder / MANIFEST
        self.adopt = adopt

    def previous(self) -> set[str]:
        if self.path.is_file():
            try:
                listed = json.loads(self.path.read_text())
                return {name for name in listed.get("files", []) if isinstance(name, str) and "/" not in name}
            except (ValueError, OSError, AttributeError):
                return set()
        return {p.name for p in self.folder.glob("*.yaml")} if self.adopt and self.folder.is_dir() else set()

    def write(self, files: dict[str, str], stale_pattern: str = "*") -> list[Path]:
        """Write `files` (name -> text) into the folder, remove those of the manifest no longer written, and
        record the new list; WriteRefused, before anything is written, for a name a file not of ours has."""
        try:
            return self._write(files, stale_pattern)
        except OSError as err:
            raise WriteRefused(f"{err.filename or self.folder}: can't be written: {err.strerror or err}") from None

    def _write(self, files: dict[str, str], stale_pattern: str) -> list[Path]:
        if self.folder.exists() and not self.folder.is_dir():
            raise WriteRefused(f"{self.folder} is a file, not a folder; nothing was written")
        self.folder.mkdir(parents=True, exist_ok=True)
        ours = self.previous()
        theirs = sorted(name for name in files if (self.folder / name).exists() and name not in ours)
        if theirs:
            raise WriteRefused(f"{self.folder}/{theirs[0]} exists and was not written by this command; nothing "
                               "was written (move it, or choose another output folder)")
        written = []
        for name, text in sorted(files.items()):
            replace_text(self.folder / name, text)
            written.append(self.folder / name)
        for name in sorted(ours - set(files)):
            stale = self.folder / name
            if stale.is_file() and stale.match(stale_pattern):
                stale.unlink()
        replace_text(self.path, json.dumps({"files": sorted(files)}, indent=1) + "\n")
        return written
