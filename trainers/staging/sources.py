"""Where a dataset comes from: a file URL, a Hugging Face Hub dataset at a revision, or a mounted path.

Each source lists the files it stages as (name, how to fetch it); the Hub
is asked which files a dataset has at a revision, and that revision is
resolved to its commit so a staged copy names exactly what it holds.
Hub API: https://huggingface.co/docs/hub/api#get-apidatasetsrepoidrevisionrevision
"""

from __future__ import annotations

import fnmatch
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

# Files a dataset directory is read from (datasets' packaged builders).
DATA_SUFFIXES = (".parquet", ".json", ".jsonl", ".csv", ".txt", ".arrow")


class SourceError(Exception):
    """A source that no retry can fix (bad spec, not found, no access): exit 78."""


@dataclass(frozen=True)
class Remote:
    name: str  # path below the dataset's directory
    url: str | None = None  # fetched over HTTP(S)
    local: Path | None = None  # copied from a mounted path
    sha256: str | None = None  # expected, when the source states it


def hub_endpoint() -> str:
    """The Hub's address; HF_ENDPOINT as huggingface_hub reads it (tests point it at 127.0.0.1)."""
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def http_request(url: str, token: str | None) -> urllib.request.Request:
    headers = {"User-Agent": "gke-finetune-staging"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return urllib.request.Request(url, headers=headers)


def hub_files(spec: dict, token: str | None, open_url=urllib.request.urlopen) -> tuple[str, list[Remote]]:
    """(commit, files) of a Hub dataset at `spec['revision']`, filtered by config and split."""
    repo, revision = spec["id"], spec.get("revision", "main")
    api = f"{hub_endpoint()}/api/datasets/{repo}/revision/{urllib.parse.quote(revision, safe='')}"
    try:
        with open_url(http_request(api, token), timeout=60) as response:
            info = json.load(response)
    except urllib.error.HTTPError as err:
        if err.code in (401, 403, 404):
            hint = " (gated or private: set `token: true` and the stack's hfToken)" if err.code != 404 else ""
            raise SourceError(f"hub dataset {repo}@{revision}: HTTP {err.code} {err.reason}{hint}") from None
        raise
    commit = info.get("sha") or revision
    names = [s["rfilename"] for s in info.get("siblings", [])]
    chosen = [n for n in names if _wanted(n, spec)]
    if not chosen:
        raise SourceError(f"hub dataset {repo}@{revision}: no data files match config={spec.get('config')!r} "
                          f"split={spec.get('split')!r} files={spec.get('files')!r}; it has {names[:20]}")
    base = f"{hub_endpoint()}/datasets/{repo}/resolve/{commit}/"
    return commit, [Remote(n, url=base + urllib.parse.quote(n)) for n in sorted(chosen)]


def _wanted(name: str, spec: dict) -> bool:
    path = PurePosixPath(name)
    if path.parts[0].startswith(".") or not name.endswith(DATA_SUFFIXES):
        return False
    if spec.get("files") and not any(fnmatch.fnmatch(name, pattern) for pattern in spec["files"]):
        return False
    if spec.get("config") and path.parts[0] != spec["config"]:
        return False
    return not spec.get("split") or spec["split"] in path.name


def url_files(spec: dict) -> list[Remote]:
    name = spec.get("file") or PurePosixPath(urllib.parse.urlparse(spec["url"]).path).name
    if not name:
        raise SourceError(f"url {spec['url']!r} names no file; set `file`")
    return [Remote(name, url=spec["url"], sha256=spec.get("sha256"))]


def mounted_files(spec: dict) -> list[Remote]:
    """Every file below a mounted prefix of another bucket (read-only FUSE mount)."""
    root = Path(spec["path"])
    if not root.is_dir():
        raise SourceError(f"source {root} is not a directory (is the bucket mounted and readable?)")
    return [Remote(str(p.relative_to(root)), local=p) for p in sorted(root.rglob("*")) if p.is_file()]
