"""Where the doctor finds the Hugging Face token to check it against the Hub: $HF_TOKEN, else the stack's
Secret Manager secret (`hfTokenSecret`), read with the active identity.

`secretmanager.projects.secrets.versions.access` (a GET: https://cloud.google.com/secret-manager/docs/
reference/rest/v1/projects.secrets.versions/access) returns the version's `payload.data`, base64. The token
and its base64 form are hidden from any recording (answers.py). What Google answers instead says what to
do: 404, no such secret (create it); SERVICE_DISABLED, the API is off (enable it, then create the secret:
the pods mount it when they start, so it must exist before `pulumi up`); 403, this identity may not read
it (the runs read it with their own: the doctor can't check the token, and says so).
"""

from __future__ import annotations

import base64
import binascii

from admission.google_api import discovery
from tools.doctor.answers import Got
from tools.doctor.checks import MISS, WARN, Finding
from tools.doctor.google_errors import enable_api, google_error

API = "secretmanager.v1"
CREATE = "printf %s \"$HF_TOKEN\" | gcloud secrets create {secret} --project={project} --data-file=-"


def access_url(version: str) -> str:
    """The URL of the version's `:access`, from the discovery document."""
    doc = discovery.document(API)
    path = discovery.method(API, "secretmanager.projects.secrets.versions.access")["path"]
    return doc["rootUrl"] + doc["servicePath"] + path.replace("{+name}", version)


def token_from(got: Got, version: str, name: str) -> tuple[str, Finding | None]:
    """(the token, None), or ('', what the answer says to do)."""
    project, _, rest = version.removeprefix("projects/").partition("/secrets/")
    secret = rest.split("/versions/")[0]
    create = CREATE.format(secret=secret, project=project)
    if got.status == 200 and isinstance(got.body, dict):
        try:
            return base64.b64decode((got.body.get("payload") or {}).get("data", ""), validate=True).decode().strip(), None
        except (binascii.Error, UnicodeDecodeError):
            return "", Finding(name, MISS, f"{version}: the payload is not a token", f"a new version: {create}")
    error = google_error(got)
    if got.status == 404:
        return "", Finding(name, MISS, f"no secret {version} (HTTP 404)", f"`{create}` (a read token: "
                           "https://huggingface.co/settings/tokens)")
    if error.says("SERVICE_DISABLED"):
        return "", Finding(name, MISS, f"the Secret Manager API is off in {project} (Google: SERVICE_DISABLED)",
                           f"{enable_api('secretmanager.googleapis.com', project)}; then `{create}`")
    return "", Finding(name, WARN, f"{version}: " + (f"HTTP {got.status}: " if got.status else "no answer: ")
                       + f"{error.message}; the runs read it with their own identity, this check needs "
                       "secretmanager.versions.access", "set HF_TOKEN to the token to check it here")


def hide_payload(answers, got: Got) -> None:
    """Keep the token's base64 form out of a recording too."""
    if hasattr(answers, "hide") and isinstance(got.body, dict):
        answers.hide((got.body.get("payload") or {}).get("data", ""))
