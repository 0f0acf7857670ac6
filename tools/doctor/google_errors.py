"""What a Google API's error answer says: its HTTP status, its canonical code and, where Google gives one,
the machine-readable reason.

Google's REST APIs answer an error with `{"error": {"code", "message", "status", "details"}}`, where
`details` holds `google.rpc.ErrorInfo` items whose `reason` is one of `google.api.ErrorReason`
(https://cloud.google.com/apis/design/errors#error_info; googleapis google/api/error_reason.proto, as
googleapis-common-protos ships it). The reason says what to do: SERVICE_DISABLED (the API is off in the
project: enable it, `metadata.service` names it), USER_PROJECT_DENIED (the caller may not bill the user
project), IAM_PERMISSION_DENIED (a permission is missing). A reason outside Google's list is read as none.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from google.api import error_reason_pb2

from tools.doctor.answers import Got

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
REASONS = frozenset(error_reason_pb2.ErrorReason.keys())


@dataclass(frozen=True)
class GoogleError:
    http: int  # 0: no answer
    status: str = ""  # google.rpc.Code's name, e.g. PERMISSION_DENIED
    reason: str = ""  # google.api.ErrorReason's name, e.g. SERVICE_DISABLED; "" when Google gives none
    message: str = ""
    metadata: dict[str, str] = field(default_factory=dict)

    def says(self, reason: str) -> bool:
        return self.reason == reason


def google_error(got: Got) -> GoogleError:
    """The error in `got` (an answer that is not 2xx), as Google's error model spells it."""
    body = got.body if isinstance(got.body, dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else {}
    message = str(error.get("message") or (got.error if got.status == 0 else str(got.body or "")[:200]))
    for detail in error.get("details") or ():
        if isinstance(detail, dict) and detail.get("@type") == ERROR_INFO and detail.get("reason") in REASONS:
            metadata = {str(k): str(v) for k, v in (detail.get("metadata") or {}).items()}
            return GoogleError(got.status, str(error.get("status", "")), detail["reason"], message, metadata)
    return GoogleError(got.status, str(error.get("status", "")), "", message)


def enable_api(service: str, project: str) -> str:
    """The fix for SERVICE_DISABLED (https://cloud.google.com/service-usage/docs/enable-disable)."""
    return (f"`gcloud services enable {service} --project={project}` (needs serviceusage.services.enable: "
            f"roles/serviceusage.serviceUsageAdmin), then run make doctor again")
