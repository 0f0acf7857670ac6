"""The Kubernetes provider users get, and the one the e2e runs.

Users get the SDK's own release (requirements.txt): the engine loads the
provider plugin of the SDK's version. It must be 4.29.0 or later: before it,
a create applies server-side, which silently adopts an object of the same name
that exists already, and a later `destroy` deletes that object
(pulumi-kubernetes #2926, fixed by #4278 in 4.29.0: a create fails with
AlreadyExists unless the provider sets `upsertExistingObjects`).

The e2e builds the newest provider the Go module proxy serves
(e2e/tools/pulumi-kubernetes/recipe, PROVIDER_VERSION) and runs the shipped
SDK with it; e2e/README.md and the e2e's output say which plugin ran.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The first release whose create refuses to adopt an existing object.
NO_ADOPTION_SINCE = (4, 29, 0)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _pin(name: str) -> str:
    text = (ROOT / "requirements.txt").read_text()
    return re.search(rf"^{re.escape(name)}==(\S+)$", text, re.M).group(1)


def _e2e_provider() -> str:
    recipe = (ROOT / "e2e" / "tools" / "pulumi-kubernetes" / "recipe").read_text()
    return re.search(r'^PROVIDER_VERSION="([^"]+)"$', recipe, re.M).group(1)


def test_the_shipped_kubernetes_sdk_never_adopts_an_existing_object():
    assert _version(_pin("pulumi-kubernetes")) >= NO_ADOPTION_SINCE, _pin("pulumi-kubernetes")


def test_the_e2e_says_which_provider_it_runs_when_it_is_not_the_shipped_one():
    shipped, tested = _pin("pulumi-kubernetes"), _e2e_provider()
    if tested == shipped:
        return
    readme = (ROOT / "e2e" / "README.md").read_text()
    assert f"pulumi-kubernetes {shipped}" in readme and f"provider {tested}" in readme
    # The e2e prints it at the head of its own output.
    assert "e2e_provider_note" in (ROOT / "e2e" / "tests" / "conftest.py").read_text()
