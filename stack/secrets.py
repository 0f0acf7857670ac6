"""The stack's secrets: the Hugging Face token, read only by runs whose trainer reads the Hub.

A trainer row says whether its runs read the Hugging Face Hub (models,
datasets) and so get the token mounted (`Trainer.hf_token`, core/trainers.py);
a stack without such a run or dataset mounts no token at all (the TPU trainer
reads its weights and data from the bucket, never from the Hub).

The token lives in Secret Manager, never in Pulumi: `hfTokenSecret` names the
secret (in the stack's project unless it says `projects/<p>/secrets/<s>`; its
`latest` version unless it says `/versions/<n>`), and GKE's Secret Manager
add-on mounts it into the pods that read the Hub (manifests/token.py). Pulumi's
state then holds no third-party secret. The former `hfToken` key is refused in
any form: in plain text it is in the repository; as a Pulumi secret
(`pulumi config set --secret`), its ciphertext and the passphrase's salt are in
the stack file, and whoever holds the passphrase (a job that previews) decrypts
it, and the state holds the Kubernetes Secret made of it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal

from core.names import HF_TOKEN_SECRET
from core.syntax import PROJECT_ID
from core.trainers import OWN_CONTAINER, TRAINERS
from stack.problems import Problem

HF_TOKEN_KEY = "hfToken"
HF_TOKEN_SECRET_KEY = "hfTokenSecret"
# How the stack file holds the retired key, as the reader finds it.
TokenState = Literal["unset", "plain", "secret"]
MOVE_IT = (f"the token in Secret Manager, which {HF_TOKEN_SECRET_KEY} names (default {HF_TOKEN_SECRET!r}): "
           f"`printf %s \"$HF_TOKEN\" | gcloud secrets create {HF_TOKEN_SECRET} --data-file=-`, "
           f"then `pulumi config rm {HF_TOKEN_KEY}` (docs/security.md)")
# A secret's id: letters, digits, hyphens and underscores, up to 255
# (https://cloud.google.com/secret-manager/docs/reference/rest/v1/projects.secrets/create, secretId).
_SECRET = re.compile(r"(?:projects/(?P<project>[^/]+)/secrets/)?(?P<secret>[A-Za-z0-9_-]{1,255})"
                     r"(?:/versions/(?P<version>latest|[1-9][0-9]*))?")
SECRET_FORMS = "<secret>, projects/<project>/secrets/<secret>, either with /versions/<n|latest>"


def secret_problems(value: str) -> list[Problem]:
    """`hfTokenSecret`'s problems: its form, and a project id that is one."""
    found = _SECRET.fullmatch(value)
    if found is None:
        return [Problem("", value, "is not a Secret Manager secret", SECRET_FORMS)]
    if found["project"] is not None and not PROJECT_ID.match(found["project"]):
        return [Problem("", value, f"names {found['project']!r}, which is not a project id", SECRET_FORMS)]
    return []


def secret_version(value: str, project: str) -> str:
    """The version the pods mount: `projects/<p>/secrets/<s>/versions/<v>`."""
    found = _SECRET.fullmatch(value)
    assert found is not None, value  # validated by secret_problems
    return f"projects/{found['project'] or project}/secrets/{found['secret']}/versions/{found['version'] or 'latest'}"


def secret_name(value: str, project: str) -> str:
    """The secret itself (`projects/<p>/secrets/<s>`), on which its readers are granted."""
    return secret_version(value, project).rsplit("/versions/", 1)[0]


def file_token_state(raw: Any) -> TokenState:
    """How a stack file (or Pulumi.yaml's default) holds `hfToken`: '' and absent are unset."""
    if isinstance(raw, dict) and "secure" in raw:
        return "secret"
    return "plain" if raw not in (None, "") else "unset"


def runs_needing_hf_token(runs: Iterable[Any]) -> list[tuple[int, str, str]]:
    """(index, name, trainer) of each run whose trainer reads the Hub.

    `runs` are RunConfigs or the stack file's raw run mappings (so that the
    token is checked even when another key of a run is invalid).
    """
    found = []
    for index, run in enumerate(runs if isinstance(runs, (list, tuple)) else ()):
        trainer = run.get("trainer") if isinstance(run, dict) else getattr(run, "trainer", None)
        name = run.get("name") if isinstance(run, dict) else getattr(run, "name", None)
        row = TRAINERS.get(trainer) if isinstance(trainer, str) else None
        asks = run.get("hfToken") if isinstance(run, dict) else getattr(run, "hf_token", False)
        if row is not None and row.hf_token:
            found.append((index, str(name), trainer))
        elif trainer is None and asks is True:  # one's own container, asking for the token
            found.append((index, str(name), OWN_CONTAINER))
    return found


def datasets_needing_hf_token(datasets: Iterable[Any]) -> list[tuple[int, str]]:
    """(index, name) of each gated or private Hub dataset (`hub.token: true`), raw mappings or models."""
    found = []
    for index, d in enumerate(datasets if isinstance(datasets, (list, tuple)) else ()):
        hub = d.get("hub") if isinstance(d, dict) else getattr(d, "hub", None)
        token = hub.get("token") if isinstance(hub, dict) else getattr(hub, "token", False)
        name = d.get("name") if isinstance(d, dict) else getattr(d, "name", None)
        if token is True:
            found.append((index, str(name)))
    return found


def needs_hf_token(runs: Iterable[Any], datasets: Iterable[Any] = ()) -> bool:
    return bool(runs_needing_hf_token(runs) or datasets_needing_hf_token(datasets))


def hf_token_problems(state: TokenState) -> list[Problem]:
    """The retired `hfToken` key, refused whether or not a run reads the Hub."""
    if state == "plain":
        return [Problem(HF_TOKEN_KEY, "[plain text]", "is stored in plain text in the stack file", MOVE_IT)]
    if state == "secret":
        return [Problem(HF_TOKEN_KEY, "[secret]", "is a Pulumi secret: the stack file holds its ciphertext and the "
                        "passphrase's salt, whoever has the passphrase reads it, and the state would hold it", MOVE_IT)]
    return []
