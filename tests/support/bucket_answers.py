"""Cloud Storage JSON API answers for the bucket checks, built from the API's documented responses: each is
checked against its method's response schema in the discovery document the pinned google-api-python-client
ships (admission/google_api/validate.py `response_violations`), so a field Google doesn't define, a wrong type or
an unknown enum value fails the test that builds it.

`Answers` serves them by path below `storage/v1/`, as components/bucket_preflight.py asks (`get(path)`).
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

from admission.google_api.validate import response_violations

API = "storage.v1"
POOL = "my-project-id.svc.id.goog"


def checked(method: str, body: dict) -> dict:
    problems = response_violations(API, f"storage.{method}", body)
    assert not problems, problems
    return body


def bucket(name: str, *, location: str = "US-EAST5", location_type: str = "region", uniform: bool = True,
           prevention: str = "enforced", hierarchical: bool = True, **more: Any) -> dict:
    """A Bucket as buckets.get returns it (the API leaves out a setting that is off)."""
    iam: dict[str, Any] = {"publicAccessPrevention": prevention}
    iam["uniformBucketLevelAccess"] = {"enabled": uniform, **({"lockedTime": "2027-03-01T00:00:00Z"} if uniform else {})}
    iam["bucketPolicyOnly"] = dict(iam["uniformBucketLevelAccess"])
    body = {"kind": "storage#bucket", "id": name, "name": name, "projectNumber": "123456789012",
            "metageneration": "3", "location": location, "locationType": location_type, "storageClass": "STANDARD",
            "iamConfiguration": iam, "etag": "CAM=", "timeCreated": "2026-11-30T10:00:00.000Z",
            "updated": "2026-11-30T10:00:00.000Z", "rpo": "DEFAULT",
            "softDeletePolicy": {"retentionDurationSeconds": "604800", "effectiveTime": "2026-11-30T10:00:00Z"},
            **more}
    if hierarchical:
        body["hierarchicalNamespace"] = {"enabled": True}
    return checked("buckets.get", body)


def principal(namespace: str, account: str, number: str = "123456789012") -> str:
    return (f"principal://iam.googleapis.com/projects/{number}/locations/global/workloadIdentityPools/{POOL}/subject/"
            f"ns/{namespace}/sa/{account}")


def write_binding(bucket_name: str, member: str, prefixes: list[str], title: str = "run-only") -> dict:
    """A conditional objectUser binding as components/storage.py `trainer_grants` declares it."""
    clauses = [f'resource.name.startsWith("projects/_/buckets/{bucket_name}/{kind}/{p}/")'
               for p in prefixes for kind in ("objects", "folders")]
    return {"role": "roles/storage.objectUser", "members": [member],
            "condition": {"title": title, "description": "Write only below its prefixes",
                          "expression": " || ".join(clauses)}}


def policy(*bindings: dict) -> dict:
    """A Policy as buckets.getIamPolicy returns it at version 3."""
    return checked("buckets.getIamPolicy", {"kind": "storage#policy", "resourceId": "projects/_/buckets/b",
                                            "version": 3, "etag": "CAE=", "bindings": list(bindings)})


def objects(*names: str) -> dict:
    """Objects as objects.list returns them (maxResults=1: the first only)."""
    items = [{"kind": "storage#object", "name": n, "bucket": "b", "size": "1024", "generation": "1",
              "crc32c": "AAAAAA==", "md5Hash": "1B2M2Y8AsgTpgAEpL5IcKA=="} for n in names[:1]]
    return checked("objects.list", {"kind": "storage#objects", **({"items": items} if items else {})})


def folders(*names: str) -> dict:
    return checked("folders.list", {"kind": "storage#folders", "items": [
        {"kind": "storage#folder", "name": n, "bucket": "b", "id": f"b/{n}", "metageneration": "1"} for n in names]})


def folder(name: str) -> dict:
    return checked("folders.get", {"kind": "storage#folder", "name": name, "bucket": "b", "id": f"b/{name}"})


def error(status: int, message: str) -> dict:
    """The JSON API's error body (https://cloud.google.com/storage/docs/json_api/v1/status-codes)."""
    return {"error": {"code": status, "message": message, "errors": [{"message": message, "domain": "global"}]}}


def q(value: str) -> str:
    return urllib.parse.quote(value, safe="")


class Answers:
    """Answers by path (and query) below storage/v1. Anything else is what the API answers for what isn't there:
    an empty listing for a list (objects.list, folders.list), a 404 for a get."""

    def __init__(self, answers: dict[str, tuple[int, Any]]):
        self.answers, self.asked = answers, []

    def get(self, path: str) -> tuple[int, Any]:
        self.asked.append(path)
        if path in self.answers:
            return self.answers[path]
        if "/o?" in path:
            return 200, objects()
        if "/folders?" in path:
            return 200, folders()
        return 404, error(404, "Not Found")


def bucket_paths(name: str) -> dict[str, str]:
    """The paths components/bucket_preflight.py reads of bucket `name`."""
    return {"bucket": f"b/{q(name)}", "iam": f"b/{q(name)}/iam?optionsRequestedPolicyVersion=3"}


def listed(name: str, prefix: str) -> str:
    return f"b/{q(name)}/o?prefix={q(prefix)}&maxResults=1"


def record_path(name: str, prefix: str) -> str:
    return f"b/{q(name)}/o/{q(prefix + '/progress.json')}?alt=media"


def record(step: int) -> str:
    return json.dumps({"schema": 1, "checkpoint_step": step})
