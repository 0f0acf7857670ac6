"""Where the built programs are: e2e/tools/build.sh --where, the one place that computes the cache key.

A program that isn't built is a loud failure naming `make e2e-tools`, never a skip.
"""

from __future__ import annotations

import functools
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "e2e" / "tools" / "build.sh"
TOOL_DIRS = ("etcd", "kubernetes", "kwok", "jobset", "kueue", "helm", "fake-gcs",
             "pulumi", "pulumi-language-python", "pulumi-kubernetes", "buildx", "docker-build")
# What a control plane with the JobSet and Kueue controllers needs (the scale benchmark: no engine).
CONTROL_PLANE_TOOLS = ("etcd", "kubernetes", "kwok", "jobset", "kueue", "helm")
# The version the kubernetes tool is built at (e2e/tools/kubernetes/recipe):
# what helm-render gives charts as .Capabilities.KubeVersion.
KUBE_VERSION = "v1.35.4"


class ToolsMissing(RuntimeError):
    pass


@dataclass(frozen=True)
class Tools:
    dirs: dict[str, Path]

    def bin(self, program: str) -> Path:
        for d in self.dirs.values():
            candidate = d / "bin" / program
            if candidate.exists():
                return candidate
        raise ToolsMissing(f"e2e: program {program!r} is in none of {sorted(self.dirs)}: run make e2e-tools")

    def chart(self, name: str) -> Path:
        for d in self.dirs.values():
            candidate = d / "charts" / name
            if (candidate / "Chart.yaml").exists():
                return candidate
        raise ToolsMissing(f"e2e: chart {name!r} is in none of the built tools: run make e2e-tools")

    def gke_crds(self) -> list[Path]:
        """The CRDs GKE installs in every cluster that the stacks rely on: ProvisioningRequest
        (copied into the kueue tool from the cluster-autoscaler apis module Kueue builds against)."""
        found = sorted((self.dirs["kueue"] / "crds").rglob("*.yaml"))
        if not found:
            raise ToolsMissing("e2e: the ProvisioningRequest CRD is missing from the kueue tool: run make e2e-tools")
        return found

    def kwok_stages(self) -> Path:
        return self.dirs["kwok"] / "stages"

    @property
    def path_entries(self) -> list[str]:
        return [str(d / "bin") for d in self.dirs.values()]


@functools.cache
def tools(names: tuple[str, ...] = TOOL_DIRS) -> Tools:
    result = subprocess.run(["bash", str(BUILD), "--where", *names], capture_output=True, text=True)
    if result.returncode != 0:
        raise ToolsMissing(result.stderr.strip() or f"e2e: {BUILD} --where failed ({result.returncode})")
    dirs = dict(line.split(" ", 1) for line in result.stdout.splitlines() if line.strip())
    return Tools({name: Path(path) for name, path in dirs.items()})
