"""Manifests (plain dicts) to YAML files, one per run. PyYAML and tools/files.py only: no module of the
layers below tools.

The offline plan imports this before it switches to the tree it plans, so it
must not load any module of the project's layers.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml

from tools.files import MANIFEST, OwnedFiles, replace_text


def to_yaml(manifest: Mapping) -> str:
    # Key order is the builders' order, which reads top-down like a manifest.
    return yaml.safe_dump(dict(manifest), sort_keys=False, default_flow_style=False, width=120)


def write_manifests(manifests: Mapping[str, Mapping], out_dir: Path, adopt: bool = False,
                    whole_folder: bool = False) -> list[Path]:
    """Write <name>.yaml for each manifest into `out_dir`, removing only the files this command wrote there
    before and no longer writes (tools/files.py OwnedFiles; `adopt`: the command's own default folder, whose
    files from before the manifest existed are its own). `whole_folder`: a folder that holds these files and
    nothing else (the goldens): every other *.yaml there is removed, no manifest kept."""
    texts = {f"{name}.yaml": to_yaml(manifest) for name, manifest in manifests.items()}
    if not whole_folder:
        return OwnedFiles(out_dir, adopt).write(texts, "*.yaml")
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob("*.yaml"):
        if stale.name not in texts:
            stale.unlink()
    for name, text in sorted(texts.items()):
        replace_text(out_dir / name, text)
    return [out_dir / name for name in sorted(texts)]


def only_manifest_left(folder: Path) -> bool:
    """Whether `folder` holds nothing but the command's manifest (or nothing): it may go."""
    return folder.is_dir() and {p.name for p in folder.iterdir()} <= {MANIFEST}
