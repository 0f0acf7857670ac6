"""The existing-dev stack (Pulumi.existing-dev.yaml) with its run on a ladder: a Spot node pool of the same
shape first, then its own pool. Such a stack declares the ladder controller (manifests/ladder.py), whose Role
the handoff must let the deployer create (tests/tools/test_handoff.py, e2e/tests/test_ladder_rbac.py)."""

from __future__ import annotations

from pathlib import Path

import yaml

from core.names import PROJECT as PREFIX

STACK = "existing-dev"


def ladder_overrides(root: Path) -> dict:
    """Pulumi config overrides (`offline.run_stack(STACK, overrides=...)`)."""
    config = yaml.safe_load((root / f"Pulumi.{STACK}.yaml").read_text())["config"]
    pool, run = config[f"{PREFIX}:pools"][0], config[f"{PREFIX}:runs"][0]
    spot = {**pool, "name": "spot-v6e-1x1", "capacity": "spot", "nodePool": "tpu-v6e-1x1-spot"}
    return {f"{PREFIX}:pools": [spot, pool], f"{PREFIX}:runs": [{**run, "pool": spot["name"], "ladder": [pool["name"]]}]}
