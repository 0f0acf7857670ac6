"""The Kubernetes provider the e2e builds is the one the program's SDK asks the engine for.

The SDK tells the engine which plugin version to load (its own version), so
`pulumi-kubernetes==X` in requirements.txt and the provider e2e/tools builds
(e2e/tools/pulumi-kubernetes/recipe, PROVIDER_VERSION) must be the same
release: then what `make e2e` runs through the real engine is what ships.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _pin(name: str) -> str:
    text = (ROOT / "requirements.txt").read_text()
    return re.search(rf"^{re.escape(name)}==(\S+)$", text, re.M).group(1)


def test_the_kubernetes_sdk_pin_is_the_provider_the_e2e_builds():
    recipe = (ROOT / "e2e" / "tools" / "pulumi-kubernetes" / "recipe").read_text()
    built = re.search(r'^PROVIDER_VERSION="([^"]+)"$', recipe, re.M).group(1)
    assert _pin("pulumi-kubernetes") == built
