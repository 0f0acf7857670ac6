"""A copy of the dev stack (`Pulumi.t.yaml`) whose one run reads local files, for `make check-data`'s tests,
and the check run on it in this process."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from tests.support.pulumi_harness import ROOT
from tools.data.__main__ import main

STACK = "t"


def write_stack(root: Path, datasets: list[dict], run: dict, base: str = "dev") -> Path:
    """`root` as a project holding Pulumi.yaml and stack `t`: `base`'s file with these datasets and this one
    run (the base's `serve:` dropped: it names a run of the base)."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    doc = yaml.safe_load((ROOT / f"Pulumi.{base}.yaml").read_text())
    doc["config"]["gke-finetune:datasets"] = datasets
    doc["config"]["gke-finetune:runs"] = [run]
    doc["config"].pop("gke-finetune:serve", None)
    (root / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump(doc))
    return root


def check(capsys, root: Path, run: str, *extra: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `python -m tools.data check` on stack `t`'s run."""
    code = main(["check", "--stack", STACK, "--run", run, "--root", str(root), "--quiet", *extra])
    out = capsys.readouterr()
    return code, out.out, out.err
