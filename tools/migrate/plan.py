"""What `make migrate` copies where: each old prefix of the stack's runs and datasets and its new one."""

from __future__ import annotations

from dataclasses import dataclass

from core.names import CHECKPOINT_PREFIX, DATA_PREFIX, PROFILE_PREFIX, legacy_prefix, run_prefixes
from stack.config import StackConfig


@dataclass(frozen=True)
class Move:
    what: str  # "run gemma3-single-host checkpoints"
    source: str  # a prefix, without its trailing '/'
    destination: str


def moves(config: StackConfig, run: str | None = None) -> list[Move]:
    """The run's prefixes (every run's, and every dataset's, without `run`), old -> new."""
    runs = [r.name for r in config.runs if run is None or r.name == run]
    found = []
    for name in runs:
        new = run_prefixes(config.stack, name)
        found.append(Move(f"run {name} checkpoints", legacy_prefix(CHECKPOINT_PREFIX, name), new.checkpoints))
        found.append(Move(f"run {name} profiles", legacy_prefix(PROFILE_PREFIX, name), new.profiles))
    if run is None:
        found += [Move(f"dataset {d.name}", legacy_prefix(DATA_PREFIX, d.name), config.bucket_layout.dataset(d.name))
                  for d in config.datasets]
    return found
