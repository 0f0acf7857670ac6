"""Copy one file into place: stream it to a temporary name, check it, then rename.

Nothing already in the bucket is ever overwritten by a partial file: the
download goes to `<name>.partial`, its length is checked against the
server's Content-Length and its SHA-256 against the expected one, and only
then is it renamed over the final name (an object rename on the GCS FUSE
mount). Progress goes to the Job's log: bytes, rate, ETA.
"""

from __future__ import annotations

import hashlib
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from trainers.staging.sources import Remote, SourceError, http_request

CHUNK = 4 << 20
PROGRESS_SECONDS = 10.0
# HTTP answers no retry can change.
PERMANENT_HTTP = {400, 401, 403, 404, 410, 451}


class TransferError(Exception):
    """A transfer that may succeed when retried (network, 5xx): the Job restarts the pod."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _progress(name: str, done: int, total: int | None, started: float) -> str:
    elapsed = max(time.monotonic() - started, 1e-6)
    rate = done / elapsed
    eta = f", ETA {(total - done) / rate:.0f} s" if total and rate > 0 else ""
    of = f" of {total / 1e6:.1f} MB" if total else ""
    return f"[stage] {name}: {done / 1e6:.1f} MB{of} at {rate / 1e6:.1f} MB/s{eta}"


def _stream(source, target, name: str, total: int | None) -> tuple[int, str]:
    digest, done, started, last = hashlib.sha256(), 0, time.monotonic(), time.monotonic()
    while block := source.read(CHUNK):
        target.write(block)
        digest.update(block)
        done += len(block)
        if time.monotonic() - last >= PROGRESS_SECONDS:
            log(_progress(name, done, total, started))
            last = time.monotonic()
    log(_progress(name, done, total, started) + " (done)")
    return done, digest.hexdigest()


def fetch(remote: Remote, dest: Path, token: str | None, open_url=urllib.request.urlopen) -> dict:
    """Put `remote` at dest/remote.name; returns its {name, size, sha256}."""
    final = dest / remote.name
    final.parent.mkdir(parents=True, exist_ok=True)
    partial = final.with_name(final.name + ".partial")
    try:
        with partial.open("wb") as target:
            if remote.local is not None:
                with remote.local.open("rb") as source:
                    size, sha = _stream(source, target, remote.name, remote.local.stat().st_size)
                expected_size = remote.local.stat().st_size
            else:
                size, sha, expected_size = _download(remote, target, token, open_url)
        if expected_size is not None and size != expected_size:
            raise TransferError(f"{remote.name}: got {size} of {expected_size} bytes from {remote.url}")
        if remote.sha256 and sha != remote.sha256:
            raise SourceError(f"{remote.name}: SHA-256 {sha} is not the expected {remote.sha256} ({remote.url})")
        partial.replace(final)
    finally:
        partial.unlink(missing_ok=True)
    return {"name": remote.name, "size": size, "sha256": sha}


def _download(remote: Remote, target, token: str | None, open_url) -> tuple[int, str, int | None]:
    try:
        response = open_url(http_request(remote.url, token), timeout=120)
    except urllib.error.HTTPError as err:
        kind = SourceError if err.code in PERMANENT_HTTP else TransferError
        raise kind(f"{remote.url}: HTTP {err.code} {err.reason}") from None
    except (urllib.error.URLError, OSError) as err:
        raise TransferError(f"{remote.url}: {err}") from None
    with response:
        length = response.headers.get("Content-Length")
        total = int(length) if length and length.isdigit() else None
        try:
            size, sha = _stream(response, target, remote.name, total)
        except OSError as err:  # the connection dropped mid-body
            raise TransferError(f"{remote.url}: {err}") from None
    return size, sha, total
