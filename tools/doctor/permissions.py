"""Does the active identity hold what the stack's `pulumi up` asks of Google? One question to Google.

The permissions are the project-level ones of the requests the stack makes (admission/google_api/
permissions.py, over what the program declares for this stack, run offline as `make plan` runs it).
Resource Manager's `projects.testIamPermissions` answers which of them the caller holds ("There are no
permissions required for making this API call": cloudresourcemanager v1's discovery document); the
request is built from that document (its root URL and the method's path). Each missing permission is
named with the predefined role the table grants for it, and the fix is the grant of each such role.
Roles granted on one resource (the state bucket, the token's secret) are not the project's: the
project's answer can't tell them, so they are left to the resources' own checks.
"""

from __future__ import annotations

import json

from admission.google_api import discovery
from admission.google_api import permissions as table
from tools.doctor.answers import Got
from tools.doctor.checks import MISS, OK, SKIP, Finding
from tools.doctor.google_errors import enable_api, google_error

API, METHOD = "cloudresourcemanager.v1", "cloudresourcemanager.projects.testIamPermissions"
NAME = "deploy permissions"


def url(project: str) -> str:
    doc = discovery.document(API)
    return doc["rootUrl"] + doc["servicePath"] + discovery.method(API, METHOD)["path"].replace("{resource}", project)


def project_needs(methods: list[str]) -> dict[str, str]:
    """permission -> the role granted for it, over the project-level needs of `methods`."""
    out: dict[str, str] = {}
    for (role, scope), held in table.roles(methods).items():
        if scope in (table.PROJECT, table.NODE_ACCOUNTS):
            out.update({p: role for p in held if p not in out})
    return dict(sorted(out.items()))


def member(accounts_json: str) -> str:
    """The active gcloud account as an IAM member, for the fix ('' when none is known)."""
    try:
        active = [a.get("account", "") for a in json.loads(accounts_json or "[]") if a.get("status") == "ACTIVE"]
    except (ValueError, AttributeError):
        return ""
    if not active:
        return ""
    kind = "serviceAccount" if active[0].endswith(".gserviceaccount.com") else "user"
    return f"{kind}:{active[0]}"


def finding(project: str, needs: dict[str, str], got: Got, who: str) -> Finding:
    if got.status != 200 or not isinstance(got.body, dict):
        error = google_error(got)
        if error.says("SERVICE_DISABLED"):
            service = error.metadata.get("service", "cloudresourcemanager.googleapis.com")
            return Finding(NAME, MISS, f"the Resource Manager API is off in {project} (Google: SERVICE_DISABLED)",
                           enable_api(service, project))
        return Finding(NAME, MISS, f"testIamPermissions on {project}: " + (f"HTTP {got.status}: " if got.status
                                                                           else "no answer: ") + error.message,
                       "check the project id and the Application Default Credentials")
    held = set(got.body.get("permissions") or ())
    missing = {p: role for p, role in needs.items() if p not in held}
    if not missing:
        return Finding(NAME, OK, f"the active identity holds all {len(needs)} the stack's requests need on {project}")
    by_role: dict[str, list[str]] = {}
    for permission, role in missing.items():
        by_role.setdefault(role, []).append(permission)
    detail = f"{len(missing)} of {len(needs)} missing on {project}: " + "; ".join(
        f"{role} ({', '.join(perms)})" for role, perms in sorted(by_role.items()))
    fix = " && ".join(f"gcloud projects add-iam-policy-binding {project} --role={role} --member={who or '<member>'}"
                      for role in sorted(by_role))
    return Finding(NAME, MISS, detail, f"`{fix}`")


def permission_findings(answers, project: str, methods: list[str] | None, token: str, who: str) -> list[Finding]:
    if not token:
        return [Finding(NAME, SKIP, "no access token (Application Default Credentials, above)")]
    if methods is None:
        return [Finding(NAME, SKIP, "the stack could not be planned offline (`make plan` says why)")]
    needs = project_needs(methods)
    got = answers.post(url(project), {"permissions": sorted(needs)}, token)
    return [finding(project, needs, got, who)]
