"""Where a benchmark's figures go: JSON under bench/results/, with a line saying so."""

from __future__ import annotations

import json
import os


def write(report: dict, out: str | os.PathLike) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    print(f"wrote {out}")
