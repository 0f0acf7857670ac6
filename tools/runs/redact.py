"""What `make inspect` leaves out of the folder it writes: secrets, in objects and in log lines.

- A Secret's `data` and `stringData` (the run's pods name the Hugging Face token's Secret; its value is
  never read here, but an object list could carry one).
- An environment variable's literal `value` whose name says it holds a credential (core/syntax.py
  `looks_like_credential`, the rule the stack's `env:` is held to); references (`valueFrom`) are kept: they
  name a Secret, not its value.
- `kubectl.kubernetes.io/last-applied-configuration`, which repeats an object whole, secrets included,
  and `metadata.managedFields` (who set which field: noise for a person debugging).
- In text (logs, events): Hugging Face tokens (`hf_` and 30 or more letters and digits), Google OAuth
  access tokens (`ya29.`), bearer tokens, private keys (PEM blocks, a service account key's
  `private_key`), and `token=`/`password=`-style assignments.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from core.syntax import looks_like_credential

REDACTED = "[redacted]"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
TEXT_SECRETS = (
    (re.compile(r"hf_[A-Za-z0-9]{30,}"), "hf_" + REDACTED),
    (re.compile(r"ya29\.[A-Za-z0-9_\-.]+"), "ya29." + REDACTED),
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9_\-.=:/+]{8,}"), r"\1" + REDACTED),
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.DOTALL), REDACTED),
    (re.compile(r'("private_key"\s*:\s*)"[^"]*"'), r'\1"' + REDACTED + '"'),
    (re.compile(r"(?i)\b((?:hf_|hugging_?face_?)?(?:token|password|passwd|secret|api_?key)\s*[=:]\s*)(['\"]?)[^\s'\",;]+"),
     r"\1\2" + REDACTED),
)


def redact_text(text: str) -> str:
    for pattern, replacement in TEXT_SECRETS:
        text = pattern.sub(replacement, text)
    return text


def _env(env: list) -> list:
    out = []
    for var in env:
        if isinstance(var, Mapping) and "value" in var and looks_like_credential(str(var.get("name", ""))):
            var = {**var, "value": REDACTED}
        out.append(var)
    return out


def redact(obj: Any) -> Any:
    """A copy of a Kubernetes object (or a list, or any JSON value) with its secrets taken out."""
    if isinstance(obj, list):
        return [redact(item) for item in obj]
    if isinstance(obj, str):
        return redact_text(obj)
    if not isinstance(obj, Mapping):
        return obj
    out = {}
    for key, value in obj.items():
        if key in ("data", "stringData") and obj.get("kind") == "Secret":
            out[key] = {k: REDACTED for k in value or {}}
        elif key == "managedFields":
            continue
        elif key == "annotations" and isinstance(value, Mapping):
            out[key] = {k: redact(v) for k, v in value.items() if k != LAST_APPLIED}
        elif key == "env" and isinstance(value, list):
            out[key] = [redact(v) for v in _env(value)]
        else:
            out[key] = redact(value)
    return out
