"""`make download`: a run's export (or one of its checkpoints) from the stack's bucket to this machine.

With the Cloud Storage client (google-cloud-storage: Application Default Credentials; the
`STORAGE_EMULATOR_HOST` it honours points it at an emulator). Nothing is downloaded before the
whole plan is known to be good: the export's completion marker is read first (no marker: the export
is not complete, or not there, and nothing is fetched), every file it lists must be in the bucket at
its size, and the directory must be empty, or hold a download of this same export, unless --force.

Each file goes to `<name>.part` and is renamed into place once its CRC32C (the checksum every Cloud
Storage object carries; MD5 where an object has no CRC32C) matches the object's; an interrupted
download continues from the bytes its `.part` holds (a ranged read), and a file already there whole
(its size and CRC32C the object's) is not fetched again. The marker is written locally last, as in
the bucket, so `make generate` never loads a half-downloaded directory. Each file is read at the
generation listed, so a file rewritten meanwhile fails its download rather than mixing two exports.
https://cloud.google.com/storage/docs/data-validation
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from trainers import export_dir

CHUNK = 8 * 1024 * 1024
PART = ".part"
# The TRL trainer's checkpoint directories and their completion marker (trainers/trl_gpu/checkpoints.py);
# the JAX trainer's are named by the step alone (Orbax writes a step under a temporary name first).
TRL_COMPLETE = "checkpoint_complete.json"


class DownloadError(Exception):
    """Why nothing (more) is downloaded; `code` is the exit code."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


EX_NOINPUT, EX_UNAVAILABLE, EX_CANTCREAT, EX_CONFIG = 66, 69, 73, 78


@dataclass(frozen=True)
class Remote:
    """One object to fetch: its name relative to the prefix, its size, checksums and generation."""

    name: str
    size: int
    crc32c: str | None
    md5: str | None
    generation: int | None


def _objects(bucket, prefix: str) -> dict[str, Remote]:
    from google.api_core import exceptions  # pylint: disable=import-outside-toplevel

    try:
        blobs = list(bucket.list_blobs(prefix=prefix + "/"))
    except exceptions.GoogleAPIError as err:
        raise DownloadError(f"gs://{bucket.name}/{prefix}/ cannot be listed: {err}", EX_UNAVAILABLE) from None
    return {b.name[len(prefix) + 1:]: Remote(b.name[len(prefix) + 1:], int(b.size or 0), b.crc32c, b.md5_hash,
                                             b.generation)
            for b in blobs if not b.name.endswith("/")}


def export_plan(bucket, prefix: str) -> tuple[dict, list[Remote]]:
    """(the export's marker, the files to fetch, the marker last); DownloadError when it is not complete."""
    found = _objects(bucket, prefix)
    where = f"gs://{bucket.name}/{prefix}/"
    if export_dir.MARKER not in found:
        why = "is empty or not there" if not found else f"has {len(found)} files but no {export_dir.MARKER}"
        raise DownloadError(f"{where} {why}: the export is not complete (the run has not succeeded yet, or is "
                            "still writing it); `make status` says where the run is", EX_NOINPUT)
    marker = _read_json(bucket, f"{prefix}/{export_dir.MARKER}", where)
    try:
        marker = export_dir.check_marker(marker, where)
    except export_dir.IncompleteExport as err:
        raise DownloadError(str(err), EX_NOINPUT) from None
    files = []
    for name, size in marker["files"].items():
        remote = found.get(name)
        if remote is None or remote.size != size:
            raise DownloadError(f"{where}{name} is missing or not {size} bytes, as {export_dir.MARKER} lists it: "
                                "the export is being rewritten; try again when `make status` shows it complete",
                                EX_NOINPUT)
        files.append(remote)
    return marker, files + [found[export_dir.MARKER]]


def checkpoint_plan(bucket, bases: tuple[str, ...], step: int) -> tuple[str, list[Remote]]:
    """(the checkpoint's prefix, its files) of a complete checkpoint at `step` below the first of `bases`
    (the run's checkpoint prefixes: the stack's layout, then the one before prefixes carried the stack)
    that holds one."""
    for base in bases:
        try:
            return _checkpoint_below(bucket, base, step)
        except DownloadError:
            if base == bases[-1]:
                raise
    raise DownloadError("no checkpoint prefix to look in", EX_NOINPUT)


def _checkpoint_below(bucket, base: str, step: int) -> tuple[str, list[Remote]]:
    for prefix, complete in ((f"{base}/checkpoint-{step}", TRL_COMPLETE), (f"{base}/{step}", None)):
        found = _objects(bucket, prefix)
        if found and (complete is None or complete in found):
            return prefix, list(found.values())
    raise DownloadError(f"gs://{bucket.name}/{base}/ has no complete checkpoint of step {step}", EX_NOINPUT)


def _read_json(bucket, name: str, where: str) -> object:
    from google.api_core import exceptions  # pylint: disable=import-outside-toplevel

    try:
        return json.loads(bucket.blob(name).download_as_bytes())
    except exceptions.GoogleAPIError as err:
        raise DownloadError(f"{where}{export_dir.MARKER} cannot be read: {err}", EX_UNAVAILABLE) from None
    except ValueError as err:
        raise DownloadError(f"{where}{export_dir.MARKER} is not JSON: {err}", EX_NOINPUT) from None


def check_target(target: Path, marker: dict | None, files: list[Remote], force: bool) -> None:
    """Refuse a directory that holds something else than a (partial) download of these same files."""
    if not target.exists():
        return
    if not target.is_dir():
        raise DownloadError(f"{target} is a file; name a directory (DIR=...)", EX_CONFIG)
    present = {p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()}
    names = {f.name for f in files}
    local_marker = target / export_dir.MARKER
    if local_marker.is_file() and marker is not None and not force:
        try:
            same = json.loads(local_marker.read_text()).get("completed_at") == marker.get("completed_at")
        except ValueError:
            same = False
        if not same:
            raise DownloadError(f"{target} holds another export (its {export_dir.MARKER} differs); --force "
                                "(FORCE=1) replaces it, or choose another DIR", EX_CONFIG)
    strangers = sorted(p for p in present if p not in names and p.removesuffix(PART) not in names)
    if strangers and not force:
        raise DownloadError(f"{target} holds files this download would not write ({', '.join(strangers[:3])}"
                            f"{'...' if len(strangers) > 3 else ''}); --force (FORCE=1) downloads beside them, "
                            "or choose another DIR", EX_CONFIG)


def crc32c_of(path: Path) -> str:
    import google_crc32c  # pylint: disable=import-outside-toplevel

    checksum = google_crc32c.Checksum()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            checksum.update(chunk)
    return base64.b64encode(checksum.digest()).decode()


def md5_of(path: Path) -> str:
    digest = hashlib.md5()  # noqa: S324  # Cloud Storage's own object checksum, not a security use
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            digest.update(chunk)
    return base64.b64encode(digest.digest()).decode()


def matches(path: Path, remote: Remote) -> bool:
    """Whether the local file is the object: its size, then its CRC32C (else MD5)."""
    if not path.is_file() or path.stat().st_size != remote.size:
        return False
    if remote.crc32c:
        return crc32c_of(path) == remote.crc32c
    return remote.md5 is not None and md5_of(path) == remote.md5


def fetch(bucket, prefix: str, remote: Remote, target: Path, bar) -> bool:
    """The object at `target`, checked; False when it was there already."""
    path = target / remote.name
    if matches(path, remote):
        bar.update(remote.size)
        return False
    part = path.with_name(path.name + PART)
    part.parent.mkdir(parents=True, exist_ok=True)
    done = part.stat().st_size if part.is_file() else 0
    if done > remote.size:
        part.unlink()
        done = 0
    bar.update(done)
    blob = bucket.blob(f"{prefix}/{remote.name}", generation=remote.generation)
    if done < remote.size:
        with part.open("ab") as f:
            # A ranged read has no whole-object checksum to check as it comes: the whole file is checked below.
            blob.download_to_file(_Counting(f, bar), start=done or None, checksum=None if done else "auto")
    if not matches(part, remote):
        part.unlink()
        raise DownloadError(f"gs://{bucket.name}/{prefix}/{remote.name}: the downloaded file's size or checksum "
                            "is not the object's (removed; run the download again)", EX_CANTCREAT)
    os.replace(part, path)
    return True


class _Counting:
    """A file object that moves the progress bar as bytes are written."""

    def __init__(self, f, bar):
        self.f, self.bar = f, bar

    def write(self, data: bytes) -> int:
        self.bar.update(len(data))
        return self.f.write(data)

    def __getattr__(self, name):
        return getattr(self.f, name)


def download(bucket, prefix: str, files: list[Remote], target: Path, quiet: bool = False) -> tuple[int, int]:
    """Every file in order (an export's marker is last); (fetched, already there)."""
    from tqdm import tqdm  # pylint: disable=import-outside-toplevel

    target.mkdir(parents=True, exist_ok=True)
    fetched = kept = 0
    total = sum(f.size for f in files)
    with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, disable=quiet, desc=target.name) as bar:
        for remote in files:
            if fetch(bucket, prefix, remote, target, bar):
                fetched += 1
            else:
                kept += 1
    return fetched, kept
