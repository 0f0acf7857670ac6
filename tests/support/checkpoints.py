"""A run stopped after one of its checkpoints, without running it again: the trainers' resume tests restart
from the uninterrupted run's own mid-run step, as a preempted run would."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def stopped_after(step_dir: Path, into: Path) -> Path:
    """`into`/<step_dir's name>, holding that step alone: hard links to the uninterrupted run's files, which a
    restore only reads (a later save or rotation there unlinks its own names, never the originals)."""
    target = Path(into) / Path(step_dir).name
    shutil.copytree(step_dir, target, copy_function=os.link)
    return target
