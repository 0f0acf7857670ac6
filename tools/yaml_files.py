"""Manifests (plain dicts) to YAML files, one per run. PyYAML only: no project module.

The offline plan imports this before it switches to the tree it plans, so it
must not load any module of the project.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml


def to_yaml(manifest: Mapping) -> str:
    # Key order is the builders' order, which reads top-down like a manifest.
    return yaml.safe_dump(dict(manifest), sort_keys=False, default_flow_style=False, width=120)


def write_manifests(manifests: Mapping[str, Mapping], out_dir: Path) -> list[Path]:
    """Write <name>.yaml for each manifest, removing files of manifests that no longer exist."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob("*.yaml"):
        if stale.stem not in manifests:
            stale.unlink()
    paths = []
    for name, manifest in sorted(manifests.items()):
        path = out_dir / f"{name}.yaml"
        path.write_text(to_yaml(manifest))
        paths.append(path)
    return paths
