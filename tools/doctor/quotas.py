"""The accelerator quota a stack's pools need, read from the Cloud Quotas API.

One GET per quota: the project's QuotaInfo (`projects.locations.services.quotaInfos.get`,
https://cloud.google.com/docs/quotas/reference/rest/v1/projects.locations.services.quotaInfos/get), with
the project as user project: Cloud Quotas is a client-based API, so user credentials must name the
project it bills (https://cloud.google.com/docs/quotas/set-quota-project). Where a quota is short, one
more GET lists the project's quota preferences still being decided (`quotaPreferences.list` with
`reconciling=true`, https://cloud.google.com/docs/quotas/reference/rest/v1/projects.locations.quotaPreferences/list),
so a request already made is named instead of asking for another.

The answers are read with the types of Google's own client library for this API
(google-cloud-quotas: `QuotaInfo`, `ListQuotaPreferencesResponse`, the API's messages in proto3 JSON),
so a field Google renames is a parse that finds nothing, not a guess. A QuotaInfo's `dimensionsInfos`
are ordered from the most specific to the least, and one without a dimension applies to every value of
it that no other names (the type's documentation): the first one that applies to the region and the
pool's dimensions is the limit in force.

When the Cloud Quotas API is off in the project, Google answers 403 with reason SERVICE_DISABLED
(google_errors.py): the fix is to enable it, not to ask for quota.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import quote

from google.cloud.cloudquotas_v1 import types as cq

from tools.doctor.answers import Got
from tools.doctor.checks import MISS, OK, SKIP, WARN, Finding
from tools.doctor.google_errors import enable_api, google_error

CLOUD_QUOTAS = "https://cloudquotas.googleapis.com/v1"
QUOTAS_API = "cloudquotas.googleapis.com"
SERVICE = "compute.googleapis.com"
UNLIMITED = -1


@dataclass(frozen=True)
class Need:
    """What the stack's pools can hold at once, against one quota."""

    what: str  # `tpu-v6e on-demand`
    quota_id: str
    dimensions: tuple[tuple[str, str], ...]  # besides the region: (`tpu_family`, `CT6E`)
    chips: int


def info_url(project: str, quota_id: str) -> str:
    return f"{CLOUD_QUOTAS}/projects/{project}/locations/global/services/{SERVICE}/quotaInfos/{quota_id}"


def pending_url(project: str) -> str:
    return f"{CLOUD_QUOTAS}/projects/{project}/locations/global/quotaPreferences?filter={quote('reconciling=true')}"


def _parse(message_type, body):
    if not isinstance(body, dict):
        return None
    try:
        return message_type.from_json(json.dumps(body), ignore_unknown_fields=True)
    except (ValueError, TypeError):  # json_format.ParseError is a ValueError
        return None


def limit(info: cq.QuotaInfo, region: str, dimensions: dict[str, str]) -> int | None:
    """The value in force for `region` and `dimensions` (-1: unlimited); None when no entry applies."""
    wanted = {"region": region, **dimensions}
    for entry in info.dimensions_infos:
        dims = dict(entry.dimensions)
        places = list(entry.applicable_locations)
        if places and region not in places and "global" not in places:
            continue
        if all(wanted.get(key) == value for key, value in dims.items()):
            return int(entry.details.value)
    return None


def request_fix(need: Need, project: str, region: str) -> str:
    """A quota increase through the Cloud Quotas API
    (https://cloud.google.com/sdk/gcloud/reference/quotas/preferences/create)."""
    dims = ",".join(f"{k}={v}" for k, v in (("region", region), *need.dimensions))
    return (f"`gcloud quotas preferences create --service={SERVICE} --project={project} --quota-id={need.quota_id} "
            f"--preferred-value={need.chips} --dimensions={dims} --email=<your email>`")


def pending(need: Need, region: str, preferences: cq.ListQuotaPreferencesResponse | None) -> cq.QuotaPreference | None:
    """A request for this quota still being decided, asking for at least what the pools need."""
    wanted = {"region": region, **dict(need.dimensions)}
    for pref in (preferences.quota_preferences if preferences is not None else ()):
        if (pref.service == SERVICE and pref.quota_id == need.quota_id and pref.reconciling
                and dict(pref.dimensions) == wanted and pref.quota_config.preferred_value >= need.chips):
            return pref
    return None


def _short(need: Need, value: int | None, region: str, info: cq.QuotaInfo, asked: cq.QuotaPreference | None,
           project: str) -> Finding:
    name = f"quota {need.what}"
    detail = f"{need.quota_id}: {value or 0} in {region}, the pools can scale to {need.chips}"
    if asked is not None:
        return Finding(name, MISS, f"{detail}; a request for {asked.quota_config.preferred_value} is pending",
                       f"wait for Google's answer: `gcloud quotas preferences describe {asked.name.rsplit('/', 1)[-1]} "
                       f"--project={project}`")
    eligibility = info.quota_increase_eligibility
    if "quota_increase_eligibility" in info and not eligibility.is_eligible:
        why = eligibility.ineligibility_reason.name
        return Finding(name, MISS, f"{detail}; Google takes no increase request for it ({why})",
                       "link a billing account to the project" if why == "NO_VALID_BILLING_ACCOUNT"
                       else "use another capacity (spot, flex-start, a reservation) or another region")
    return Finding(name, MISS, detail, request_fix(need, project, region))


def _unread(need: Need, got: Got, project: str) -> Finding:
    error = google_error(got)
    name = f"quota {need.what}"
    if got.status == 404:
        return Finding(name, WARN, f"{need.quota_id}: HTTP 404: {error.message}",
                       "the quota id may have changed: `gcloud quotas info list --service=compute.googleapis.com "
                       f"--project={project}` lists them")
    if error.says("USER_PROJECT_DENIED"):
        return Finding(name, MISS, f"your account may not use {project} as its quota project ({error.message})",
                       f"roles/serviceusage.serviceUsageConsumer on {project} (serviceusage.services.use)")
    if got.status == 403:
        return Finding(name, MISS, f"{need.quota_id}: HTTP 403: {error.message}",
                       f"your account needs cloudquotas.quotas.get on {project}: roles/cloudquotas.viewer")
    return Finding(name, MISS, f"{need.quota_id}: " + (f"HTTP {got.status}: " if got.status else "no answer: ")
                   + error.message, "try again: Google did not answer")


def quota_findings(answers, project: str, region: str, needs: list[Need], token: str) -> list[Finding]:
    """One finding per quota, or one for all when the Cloud Quotas API is off in the project."""
    got = {need: answers.get(info_url(project, need.quota_id), token, user_project=project) for need in needs}
    off = next((g for g in got.values() if google_error(g).says("SERVICE_DISABLED")
                and google_error(g).metadata.get("service", QUOTAS_API) == QUOTAS_API), None)
    if off is not None:
        return [Finding("quota", MISS, f"the Cloud Quotas API is off in project {project} (Google: SERVICE_DISABLED); "
                        "the quota can't be read", enable_api(QUOTAS_API, project))]
    infos = {need: _parse(cq.QuotaInfo, g.body) if g.status == 200 else None for need, g in got.items()}
    values = {need: limit(info, region, dict(need.dimensions)) if info is not None else None
              for need, info in infos.items()}
    short = [n for n in needs if infos[n] is not None and not _enough(values[n], n.chips)]
    preferences = None
    if short:
        listed = answers.get(pending_url(project), token, user_project=project)
        preferences = _parse(cq.ListQuotaPreferencesResponse, listed.body) if listed.status == 200 else None
    out = []
    for need in needs:
        info, value = infos[need], values[need]
        if info is None:
            out.append(_unread(need, got[need], project) if got[need].status != 200 else Finding(
                f"quota {need.what}", WARN, f"{need.quota_id}: not a QuotaInfo: {str(got[need].body)[:120]}"))
        elif need in short:
            out.append(_short(need, value, region, info, pending(need, region, preferences), project))
        else:
            shown = "unlimited" if value == UNLIMITED else value
            out.append(Finding(f"quota {need.what}", OK, f"{need.quota_id}: {shown} in {region} for {need.chips}"))
    return out or [Finding("quota", SKIP, "the stack's pools spend no quota (reservations only)")]


def _enough(value: int | None, needed: int) -> bool:
    return value is not None and (value == UNLIMITED or value >= needed)
