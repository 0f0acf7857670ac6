"""Google's answers for the doctor's tests, built from Google's own definitions rather than written by hand.

- Cloud Quotas bodies from the API's messages in google-cloud-quotas (`QuotaInfo`, `QuotaPreference`,
  `ListQuotaPreferencesResponse`), serialized as its REST front end does: proto3 JSON, camelCase, enums
  by name, 64-bit integers as strings, default values left out.
- Error bodies from `google.rpc.Status` with a `google.rpc.ErrorInfo` detail (googleapis-common-protos),
  in the REST envelope `{"error": {code, message, status, details}}`
  (https://cloud.google.com/apis/design/errors#http_mapping).
- Resource Manager bodies checked against the cloudresourcemanager discovery document the pinned
  google-api-python-client ships (`response`, below).

`answers(name, **extra)` is a recorded answers file of tests/tools/doctor/ with the Google answers of a
scenario added, ready for `Recorded` or `--answers`.
"""

from __future__ import annotations

import json
from pathlib import Path

from google.api import error_reason_pb2
from google.cloud.cloudquotas_v1 import types as cq
from google.protobuf import any_pb2, json_format
from google.rpc import code_pb2, error_details_pb2, status_pb2

from admission.google_api import discovery

HERE = Path(__file__).resolve().parents[1] / "tools" / "doctor"
PROJECT, PROJECT_NUMBER, REGION = "ml-team-prod", "123456789012", "us-central1"
HTTP_OF = {"PERMISSION_DENIED": 403, "NOT_FOUND": 404, "UNAUTHENTICATED": 401, "FAILED_PRECONDITION": 400}


def _rest(message_type, message) -> dict:
    return json.loads(message_type.to_json(message, use_integers_for_enums=False,
                                           always_print_fields_with_no_presence=False))


def quota_info(quota_id: str, dimensions: list[str], entries: list[tuple[dict, int, list[str]]],
               eligible: bool = True, reason: str = "") -> dict:
    """A QuotaInfo of compute.googleapis.com: `entries` are (dimensions, value, applicable locations),
    the most specific first, as Google orders them."""
    eligibility = cq.QuotaIncreaseEligibility(
        is_eligible=eligible,
        ineligibility_reason=cq.QuotaIncreaseEligibility.IneligibilityReason[reason or "INELIGIBILITY_REASON_UNSPECIFIED"])
    info = cq.QuotaInfo(
        name=f"projects/{PROJECT_NUMBER}/locations/global/services/compute.googleapis.com/quotaInfos/{quota_id}",
        quota_id=quota_id, metric="compute.googleapis.com/" + quota_id.lower(), service="compute.googleapis.com",
        is_precise=True, container_type=cq.QuotaInfo.ContainerType.PROJECT, dimensions=dimensions,
        quota_increase_eligibility=eligibility, is_fixed=False,
        dimensions_infos=[cq.DimensionsInfo(dimensions=dims, details=cq.QuotaDetails(value=value),
                                            applicable_locations=places) for dims, value, places in entries])
    return _rest(cq.QuotaInfo, info)


def quota_preferences(*pending: tuple[str, dict, int]) -> dict:
    """The project's quota preferences still being decided: (quota id, dimensions, preferred value)."""
    listed = cq.ListQuotaPreferencesResponse(quota_preferences=[
        cq.QuotaPreference(
            name=f"projects/{PROJECT_NUMBER}/locations/global/quotaPreferences/pref-{n}", service="compute.googleapis.com",
            quota_id=quota_id, dimensions=dims, reconciling=True,
            quota_config=cq.QuotaConfig(preferred_value=value, request_origin=cq.QuotaConfig.Origin.CLOUD_CONSOLE))
        for n, (quota_id, dims, value) in enumerate(pending)])
    return _rest(cq.ListQuotaPreferencesResponse, listed)


def google_error(status: str, message: str, reason: str = "", metadata: dict | None = None) -> tuple[int, dict]:
    """(HTTP status, body) of a Google API error with canonical code `status` and ErrorInfo `reason`."""
    rpc = status_pb2.Status(code=code_pb2.Code.Value(status), message=message)
    if reason:
        error_reason_pb2.ErrorReason.Value(reason)  # a reason Google defines
        detail = any_pb2.Any()
        detail.Pack(error_details_pb2.ErrorInfo(reason=reason, domain="googleapis.com", metadata=metadata or {}))
        rpc.details.append(detail)
    body = json_format.MessageToDict(rpc)
    return HTTP_OF[status], {"error": {**body, "status": status}}


def service_disabled(service: str, title: str) -> tuple[int, dict]:
    return google_error(
        "PERMISSION_DENIED", f"{title} has not been used in project {PROJECT_NUMBER} before or it is disabled.",
        "SERVICE_DISABLED", {"service": service, "consumer": f"projects/{PROJECT_NUMBER}",
                             "activationUrl": f"https://console.developers.google.com/apis/api/{service}/overview"})


def response(api: str, method_id: str, body: dict) -> dict:
    """`body`, after checking it is an instance of the method's response schema in Google's discovery
    document (every field known, of its JSON type)."""
    schema = discovery.resolve(api, discovery.method(api, method_id)["response"])
    _check(api, schema, body, method_id)
    return body


def _check(api: str, node, value, where: str) -> None:
    node = discovery.resolve(api, node)
    kinds = {"object": dict, "array": list, "string": str, "boolean": bool, "integer": (int, str)}
    assert isinstance(value, kinds.get(node.get("type", "object"), object)), (where, value, node.get("type"))
    if isinstance(value, dict):
        fields = node.get("properties") or {}
        for key, item in value.items():
            assert key in fields, f"{where}.{key} is not a field of {node.get('id')}: {sorted(fields)}"
            _check(api, fields[key], item, f"{where}.{key}")
    elif isinstance(value, list):
        for item in value:
            _check(api, node.get("items") or {}, item, f"{where}[]")


def answers(name: str, target: Path, requests: dict | None = None, commands: dict | None = None) -> Path:
    """tests/tools/doctor/<name>.json with `requests` (url or POST key -> (status, body)) and `commands`
    added, written to `target`."""
    data = json.loads((HERE / f"{name}.json").read_text())
    for key, (status, body) in (requests or {}).items():
        data["requests"][key] = {"status": status, "body": body, "error": ""}
    data["commands"].update(commands or {})
    target.write_text(json.dumps(data, indent=1, sort_keys=True))
    return target
