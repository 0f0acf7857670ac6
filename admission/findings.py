"""What a rule found: the rule, what was asked, what is allowed, and the rule's source."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    rule: str  # e.g. "fit", "syntax", "autopilot", "node-pool"
    where: str  # the field, e.g. `spec.replicatedJobs[0]...nodeSelector`
    value: object  # what the manifest has there
    why: str  # what is wrong, with requested vs available where it applies
    source: str  # the link to the rule

    def __str__(self) -> str:
        return f"{self.rule}: {self.where}: {self.value!r} {self.why} ({self.source})"
