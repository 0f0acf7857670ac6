"""What `make e2e` passes the tests through the environment (Makefile, e2e/README.md)."""

from __future__ import annotations

import os

from tools.offline import SHIPPED_STACKS

# E2E_STACKS=dev,a4: the stacks to run (default: every shipped stack).
STACKS = tuple(s for s in (os.environ.get("E2E_STACKS") or ",".join(SHIPPED_STACKS)).split(",") if s)
# E2E_ADMISSION=off: the program runs without admission/, the real control plane judges alone.
ADMISSION = os.environ.get("E2E_ADMISSION", "on") != "off"
# E2E_LIFETIME: seconds after which the watchdog stops whatever is still running.
LIFETIME = int(os.environ.get("E2E_LIFETIME", "1800"))
# E2E_ENGINE_STACKS=dev: the shipped stacks deployed as existing-cluster stacks through the real
# Pulumi CLI (test_engine.py); default: the Standard stacks of STACKS.
ENGINE_STACKS = tuple(s for s in (os.environ.get("E2E_ENGINE_STACKS") or ",".join(
    s for s in STACKS if s != "autopilot")).split(",") if s)
