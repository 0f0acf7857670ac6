"""The findings as the stack's problems, one line each: `<key>: <value> <why>; allowed: <allowed>`.

Kept apart from the pure modules of this package, which the policy pack
runs in an environment without the stack layer (pydantic).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from admission.google_api.judge import resources_findings
from stack.problems import Problem


def declared_problems(resources: Iterable[tuple[str, str, Mapping[str, Any]]]) -> list[Problem]:
    """Every problem Google's definitions find in the declared resources' requests."""
    return [Problem(f.key, f.value, f.reason, f.allowed) for f in resources_findings(resources)]
