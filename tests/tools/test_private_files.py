"""Uploads and diagnostics carry nothing private: Cloud Build's upload (.gcloudignore) keeps what the
Dockerfiles copy and nothing of data/, inspect/, plan/, .venv* or hidden files; git ignores data/ and
inspect/; `make inspect` writes below inspect/ and redacts (tests/tools/test_runs_inspect.py)."""

from __future__ import annotations

import fnmatch
import posixpath
import subprocess
from pathlib import Path

import pytest

from core.dockerfile import TRAINER_IMAGES, content_files

ROOT = Path(__file__).resolve().parents[2]


class GcloudIgnore:
    """`gcloud topic gcloudignore`'s rules, as gcloud applies them (google-cloud-sdk
    lib/googlecloudsdk/command_lib/util/gcloudignore.py `FileChooser.IsIncluded` and glob.py `Glob`): each
    line a gitignore pattern ('#' a comment, '!' includes, a trailing '/' only folders, a leading '/' or an
    inner '/' anchors at the top, '**' any number of folders, each part an fnmatch); for each folder above a
    path and the path itself, the last pattern that matches decides, and an ignored one leaves out all below."""

    def __init__(self, text: str):
        self.patterns = []
        for line in text.splitlines():
            line = line.rstrip(" ")
            if not line or line.startswith("#"):
                continue
            negated = line.startswith("!")
            line = line[1:] if negated else line
            folder_only = line.endswith("/")
            self.patterns.append((line.rstrip("/").split("/"), negated, folder_only))

    @staticmethod
    def _matches(parts: list[str], path: str | None) -> bool:
        """Right to left: the last part against the path's last component, the rest against what is above."""
        if not parts:
            return True
        if path is None:
            return False
        head, last = posixpath.split(path) if path else ("", "")
        above = head if last else None
        *rest, part = parts
        if part == "**":
            rest = rest if rest[:1] == [""] else ["", *rest]
            prefixes = [path] + [path.rsplit("/", n)[0] for n in range(1, path.count("/") + 1)] + [""]
            return any(GcloudIgnore._matches(rest, p) for p in prefixes)
        if part == "*" and not rest and above:
            return False
        return fnmatch.fnmatchcase(last, part) and GcloudIgnore._matches(rest, above)

    def uploads(self, path: str, is_dir: bool = False) -> bool:
        parts = path.split("/")
        for n in range(1, len(parts) + 1):
            prefix, folder = "/".join(parts[:n]), n < len(parts) or is_dir
            verdict = None
            for pattern, negated, folder_only in self.patterns:
                if (folder or not folder_only) and self._matches(pattern, prefix):
                    verdict = "include" if negated else "ignore"
            if verdict == "ignore":
                return False
        return True


GCLOUD = GcloudIgnore((ROOT / ".gcloudignore").read_text())


def test_the_rules_behave_as_gclouds():
    rules = GcloudIgnore("/*\n!/docker/\ndata/\n*.pyc\ndocker/**/x\n")
    assert rules.uploads("docker/a/Dockerfile") and not rules.uploads("README.md")
    assert not rules.uploads("docker/data/x.jsonl") and rules.uploads("docker/data")  # a file named data: kept
    assert not rules.uploads("docker/m.pyc") and not rules.uploads("docker/sub/a/b/x") and rules.uploads("docker/y/z")
    assert not GcloudIgnore("/*\n!/docker\n/docker/*\n!/docker/keep\n").uploads("docker/other")


@pytest.mark.parametrize("image", sorted(TRAINER_IMAGES))
def test_cloud_build_gets_every_file_the_image_is_built_from(image):
    files = content_files(TRAINER_IMAGES[image])  # the Dockerfile, its ignore file, what its COPY takes
    assert files and [f for f in files if not GCLOUD.uploads(f)] == []
    assert GCLOUD.uploads("docker/cloudbuild.yaml")


@pytest.mark.parametrize("path", [
    "data/tickets.jsonl", "inspect/dev-run-20260101T000000Z/pods.yaml", "plan/dev/manifests/run.yaml",
    ".venv/bin/python", ".venv-jax/lib/x.py", ".pulumi-state/stacks/dev.json", "Pulumi.dev.yaml", ".git/config",
    ".env", "trainers/gemma_jax/data/private.jsonl", "trainers/trl_gpu/inspect/x.yaml",
    "trainers/sft_data/__pycache__/formats.cpython-311.pyc", "trainers/.env", "docker/.secret", "tests/golden/x.yaml",
    "models/dev/gemma3-single-host/model.safetensors",
])  # fmt: skip
def test_cloud_build_gets_nothing_private(path):
    assert not GCLOUD.uploads(path), path


def test_git_ignores_local_data_inspect_and_model_folders():
    ignored = subprocess.run(["git", "check-ignore", "--no-index", "data/tickets.jsonl", "inspect/x/pods.yaml",
                              "plan/dev/x.yaml", "models/dev/run/model.safetensors", "tools/plan/show.py"],
                             cwd=ROOT, capture_output=True, text=True)
    assert ignored.stdout.split() == ["data/tickets.jsonl", "inspect/x/pods.yaml", "plan/dev/x.yaml",
                                      "models/dev/run/model.safetensors"]



def test_make_inspect_writes_below_the_ignored_folder():
    from tools.runs.__main__ import _parser  # noqa: PLC0415

    args = _parser().parse_args(["inspect", "--stack", "dev"])
    assert args.out == Path("inspect")
