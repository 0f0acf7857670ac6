"""The JobSet and Kueue Helm charts of the pinned releases, from their Go module zips.

Each release's Go module (sigs.k8s.io/jobset, sigs.k8s.io/kueue) carries its
chart under charts/, so the Go module proxy serves the very chart the
registry does; `go mod download` fetches it once into the module cache.
A missing `go` is a loud failure, not a skip.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
from pathlib import Path

import yaml

from core.names import JOBSET_VERSION, KUEUE_VERSION

MODULES = {"jobset": ("sigs.k8s.io/jobset", JOBSET_VERSION), "kueue": ("sigs.k8s.io/kueue", KUEUE_VERSION)}


@functools.cache
def chart_dir(name: str) -> Path:
    module, version = MODULES[name]
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("the `go` command is needed to read the controllers' charts from their Go modules")
    out = subprocess.run([go, "mod", "download", "-json", f"{module}@{version}"], check=True,
                         capture_output=True, text=True, timeout=600, cwd="/")
    return Path(json.loads(out.stdout)["Dir"]) / "charts" / name


def chart_file(name: str, relative: str) -> str:
    return (chart_dir(name) / relative).read_text()


def default_values(name: str) -> dict:
    return yaml.safe_load(chart_file(name, "values.yaml"))
