"""The stack's datasets (`datasets:`): what `pulumi up` stages below the bucket's datasets/<stack>/ prefix.

Each dataset has a name (its directory, `datasets/<stack>/<name>/`) and one source:
a file URL (TinyStories' text file on the Hugging Face Hub, as the TPU
tutorial downloads it), a Hub dataset at a revision (the A4 tutorial's
text-to-SQL set), an existing `gs://` prefix, or a file or folder on the
machine running `pulumi up` (`path`, uploaded by `pulumi up` itself:
components/uploads.py). `tokenize: <model>` also
writes the JAX trainer's token shards (`datasets/<stack>/<name>/tokens/`), so its
runs start without tokenizing. Runs name a dataset in `data` (or a path
inside one); the platform points the trainer at it.
"""

from __future__ import annotations

import os
import posixpath
import re
import urllib.parse
from pathlib import Path

from pydantic import Field, StrictBool, model_validator

from core.syntax import DNS_1035_LABEL
from stack.models import StackModel
from stack.problems import MISSING, Problem, raise_problems

TOKENS_DIR = "tokens"
# A dataset's Job is `stage-<name>`; its pod names add a suffix of up to 16 characters.
DATASET_NAME_MAX = 40
_GCS = re.compile(r"^gs://(?P<bucket>[a-z0-9][a-z0-9._-]{1,220}[a-z0-9])(/(?P<prefix>.*))?$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


class HubSource(StackModel):
    id: str = Field(description="the dataset's Hub id, e.g. philschmid/gretel-synthetic-text-to-sql")
    revision: str = Field(default="main", description="a branch, tag or commit; pin a commit for repeatable runs")
    config: str | None = Field(default=None, description="the subdirectory of one configuration")
    split: str | None = Field(default=None, description="only the files of this split (in their names)")
    files: tuple[str, ...] = Field(default=(), description="glob patterns of the files to stage")
    token: StrictBool = Field(default=False, description="gated or private: mount the stack's hfToken")


class DatasetConfig(StackModel):
    name: str = Field(pattern=DNS_1035_LABEL, max_length=DATASET_NAME_MAX)
    url: str | None = Field(default=None, description="an http(s) URL of one file")
    file: str | None = Field(default=None, description="the staged file's name; default: the URL's last segment")
    sha256: str | None = Field(default=None, description="the file's expected SHA-256")
    hub: HubSource | None = None
    gcs: str | None = Field(default=None, description="gs://<bucket>/<prefix> to copy from")
    path: str | None = Field(default=None, description="a file or folder on the machine running `pulumi up`, "
                             "relative to the directory it runs in (the project's)")
    tokenize: str | None = Field(default=None, description="a JAX trainer model whose tokenizer writes token shards")

    @model_validator(mode="after")
    def _rules(self) -> DatasetConfig:
        raise_problems(dataset_problems(self))
        return self

    @property
    def kind(self) -> str:
        return "url" if self.url else "hub" if self.hub else "path" if self.path else "mounted"

    @property
    def staged_in_cluster(self) -> bool:
        """Staged by a Job in the cluster; a `path` is uploaded by `pulumi up` itself."""
        return self.path is None

    def local_files(self) -> list[tuple[str, Path]]:
        """A `path` source's files: (name below the dataset's prefix, file), in name order, hidden ones
        (a name starting with '.') left out."""
        root = Path(self.path)
        if root.is_file():
            return [(root.name, root)]
        return sorted((p.relative_to(root).as_posix(), p) for p in root.rglob("*")
                      if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts))

    @property
    def staged_file(self) -> str | None:
        if self.path and Path(self.path).is_file():
            return Path(self.path).name
        if not self.url:
            return None
        return self.file or posixpath.basename(urllib.parse.urlparse(self.url).path)

    def source_spec(self, mount: str = "/source") -> dict:
        """The source as the staging code takes it (trainers/staging)."""
        if self.url:
            spec = {"kind": "url", "url": self.url, "file": self.staged_file}
            return {**spec, "sha256": self.sha256} if self.sha256 else spec
        if self.hub:
            spec = {"kind": "hub", "id": self.hub.id, "revision": self.hub.revision}
            spec.update({k: v for k, v in (("config", self.hub.config), ("split", self.hub.split)) if v})
            return {**spec, "files": list(self.hub.files)} if self.hub.files else spec
        return {"kind": "mounted", "path": mount}

    @property
    def gcs_bucket(self) -> str | None:
        return _GCS.match(self.gcs).group("bucket") if self.gcs else None

    @property
    def gcs_prefix(self) -> str:
        return (_GCS.match(self.gcs).group("prefix") or "").strip("/") if self.gcs else ""

    def path_for(self, trainer_reads_tokens: bool) -> str:
        """Below datasets/<stack>/: what a run of this dataset reads (its token shards, when it can)."""
        if self.tokenize and trainer_reads_tokens:
            return f"{self.name}/{TOKENS_DIR}"
        return f"{self.name}/{self.staged_file}" if self.staged_file else self.name


def dataset_problems(d: DatasetConfig) -> list[Problem]:
    sources = [k for k, v in (("url", d.url), ("hub", d.hub), ("gcs", d.gcs), ("path", d.path)) if v]
    if not sources:
        return [Problem("url", MISSING, "and no hub, gcs or path either: a dataset needs a source",
                        "one of url, hub, gcs, path")]
    if len(sources) > 1:
        return [Problem(sources[1], getattr(d, sources[1]), f"is a second source beside {sources[0]}",
                        "exactly one of url, hub, gcs, path")]
    problems = _path_problems(d.path) if d.path else []
    if d.url and urllib.parse.urlparse(d.url).scheme not in ("https", "http"):
        problems.append(Problem("url", d.url, "is not an http(s) URL", "https://<host>/<path>/<file>"))
    elif d.url and not d.staged_file:
        problems.append(Problem("file", MISSING, f"and URL {d.url!r} names no file", "a file name"))
    if d.sha256 and not _SHA256.match(d.sha256):
        problems.append(Problem("sha256", d.sha256, "is not a SHA-256", "64 lower-case hex digits"))
    if d.sha256 and not d.url:
        problems.append(Problem("sha256", d.sha256, "checks a URL's file", "sha256 with url"))
    if d.hub and not _HUB_ID.match(d.hub.id):
        problems.append(Problem("hub.id", d.hub.id, "is not a Hub dataset id", "<owner>/<name>"))
    if d.gcs and not _GCS.match(d.gcs):
        problems.append(Problem("gcs", d.gcs, "is not a gs:// prefix", "gs://<bucket>/<prefix>"))
    if d.tokenize and not d.url:
        problems.append(Problem("tokenize", d.tokenize, "needs one text file to tokenize", "a dataset with `url`"))
    return problems


def _path_problems(path: str) -> list[Problem]:
    where = Path(path)
    allowed = "a file or folder on this machine, absolute or relative to " + os.getcwd()
    if not where.exists():
        return [Problem("path", path, "does not exist", allowed)]
    if where.is_dir() and not any(p.is_file() for p in where.rglob("*")):
        return [Problem("path", path, "is a folder with no file in it", allowed)]
    if not (where.is_file() or where.is_dir()):
        return [Problem("path", path, "is neither a file nor a folder", allowed)]
    return []
