"""The doctor's checks: what the first real `pulumi up` of a stack needs, each from answers (answers.py),
each saying what to do when it misses. Pure over the answers: the tests replay recorded ones.

The APIs read (GET only), with the Application Default Credentials' access token the Pulumi providers
use (`gcloud auth application-default print-access-token`):
- Service Usage `projects/<p>/services?filter=state:ENABLED`
  (https://cloud.google.com/service-usage/docs/reference/rest/v1/services/list);
- Cloud Quotas, the accelerator quotas (quotas.py);
- Compute Engine `projects/<p>/zones/<zone>/reservations/<name>`, its `specificReservation.count`,
  `inUseCount` and `instanceProperties.machineType`, and `status`
  (https://cloud.google.com/compute/docs/reference/rest/v1/reservations/get);
- the Hugging Face Hub: `api/whoami-v2` (is the token valid) and a gated model's
  `<model>/resolve/main/config.json` (may the token read it: 401 or 403 until its licence is accepted;
  https://huggingface.co/docs/hub/models-gated).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tools.doctor.answers import Got, Ran

OK, MISS, SKIP, WARN = "ok", "MISS", "skip", "warn"
# `Pulumi.yaml` types its structured keys as `object` and arrays of objects, which older CLIs refuse (README).
MIN_PULUMI = (3, 187, 0)
SERVICE_USAGE = "https://serviceusage.googleapis.com/v1"
COMPUTE = "https://compute.googleapis.com/compute/v1"
HUB = "https://huggingface.co"


@dataclass(frozen=True)
class Finding:
    check: str
    status: str  # OK, MISS, SKIP or WARN
    detail: str
    fix: str = ""


def _first_line(ran: Ran) -> str:
    return next((line.strip() for line in (ran.stderr or ran.stdout).splitlines() if line.strip()), f"exit {ran.code}")


def project_id(project: str, placeholder: str) -> Finding:
    if project == placeholder:
        return Finding("project", MISS, f"gcp:project is {placeholder!r}, the shipped stack files' placeholder",
                       "`pulumi config set gcp:project <your project id>` (`gcloud projects list` lists them)")
    return Finding("project", OK, project)


def pulumi_cli(ran: Ran) -> Finding:
    name, fix = "Pulumi CLI", "install it: https://www.pulumi.com/docs/iac/download-install/ (3.187.0 or later)"
    if ran.code != 0:
        return Finding(name, MISS, _first_line(ran), fix)
    found = re.search(r"v?(\d+)\.(\d+)\.(\d+)", ran.stdout)
    if not found:
        return Finding(name, MISS, f"`pulumi version` printed {ran.stdout.strip()!r}", fix)
    version = tuple(int(part) for part in found.groups())
    shown = ".".join(map(str, version))
    if version < MIN_PULUMI:
        return Finding(name, MISS, f"{shown} is older than 3.187.0 (Pulumi.yaml's structured keys)",
                       "upgrade: `pulumi version` should say 3.187.0 or later")
    return Finding(name, OK, f"{shown} (3.187.0 or later)")


def gcloud_account(ran: Ran) -> Finding:
    name = "gcloud credentials"
    fix = "`gcloud auth login` (install the gcloud CLI first: https://cloud.google.com/sdk/docs/install)"
    if ran.code != 0:
        return Finding(name, MISS, _first_line(ran), fix)
    import json  # pylint: disable=import-outside-toplevel

    try:
        accounts = json.loads(ran.stdout or "[]")
    except ValueError:
        return Finding(name, MISS, "`gcloud auth list` printed no JSON", fix)
    active = [a.get("account", "?") for a in accounts if a.get("status") == "ACTIVE"]
    return Finding(name, OK, f"active account {active[0]}") if active else Finding(name, MISS, "no active account", fix)


def adc(ran: Ran) -> Finding:
    name = "Application Default Credentials"
    if ran.code != 0 or not ran.stdout.strip():
        return Finding(name, MISS, _first_line(ran), "`gcloud auth application-default login` (the Pulumi providers and "
                       "`make status` use them)")
    return Finding(name, OK, "an access token was issued")


def auth_plugin(ran: Ran) -> Finding:
    name = "gke-gcloud-auth-plugin"
    if ran.code != 0:
        return Finding(name, MISS, _first_line(ran), "`gcloud components install gke-gcloud-auth-plugin` (the Kubernetes "
                       "provider and kubectl authenticate with it)")
    return Finding(name, OK, (ran.stdout.strip().splitlines() or ["installed"])[0])


def image_builder(builder: str, to_build: list[str], buildx: Ran, engine: Ran, enabled: set[str] | None,
                  existing: bool = False) -> Finding:
    """Docker with buildx, or Cloud Build. An existing cluster's stack builds with Docker only (the plan refuses
    `imageBuilder` there: stack/existing.py), so its way out is pinning the images, never Cloud Build."""
    name = "image builder"
    other = ("pin the images by digest (`gke-finetune:images`)" if existing
             else "set `gke-finetune:imageBuilder: cloudbuild`")
    if not to_build:
        return Finding(name, SKIP, "every trainer image is pinned: nothing is built")
    if builder == "cloudbuild":
        if enabled is None:
            return Finding(name, WARN, "Cloud Build: the project's APIs could not be read (below)")
        state = "enabled" if "cloudbuild.googleapis.com" in enabled else "enabled by `pulumi up`"
        return Finding(name, OK, f"Cloud Build ({state}) builds {', '.join(to_build)}")
    if buildx.code != 0:
        return Finding(name, MISS, f"docker buildx: {_first_line(buildx)}",
                       f"install Docker with the buildx plugin, or {other}")
    if engine.code != 0:
        return Finding(name, MISS, f"the Docker engine does not answer: {_first_line(engine)}",
                       f"start the Docker engine (`docker info` must work), or {other}")
    return Finding(name, OK, f"Docker {engine.stdout.strip()} with buildx builds {', '.join(to_build)}")


def _http_problem(got: Got, what: str) -> str:
    if got.status == 0:
        return f"{what}: no answer ({got.error})"
    message = got.body.get("error", {}).get("message", "") if isinstance(got.body, dict) else str(got.body)[:200]
    return f"{what}: HTTP {got.status}" + (f": {message}" if message else "")


def enabled_services(got: Got) -> set[str] | None:
    if got.status != 200 or not isinstance(got.body, dict):
        return None
    return {s.get("config", {}).get("name", "") for s in got.body.get("services", [])}


def project_apis(project: str, required: tuple[str, ...], got: Got) -> Finding:
    name = "project APIs"
    enabled = enabled_services(got)
    if enabled is None:
        fix = (f"check the project id, and that your account may read its services (roles/serviceusage."
               f"serviceUsageConsumer on {project}); `pulumi up` enables the APIs with roles/serviceusage.serviceUsageAdmin")
        return Finding(name, MISS, _http_problem(got, f"the services of project {project}"), fix)
    missing = [api for api in required if api not in enabled]
    if missing:
        return Finding(name, OK, f"{len(required) - len(missing)} of {len(required)} enabled; `pulumi up` enables "
                       f"{', '.join(missing)} (it needs roles/serviceusage.serviceUsageAdmin)")
    return Finding(name, OK, f"all {len(required)} enabled")


def reservation(pool: str, name_: str, zone: str, machine_type: str, vms: int, got: Got) -> Finding:
    name = f"reservation {name_}"
    if got.status == 404:
        return Finding(name, MISS, f"pool {pool}: no reservation {name_!r} in {zone}",
                       f"check its name and zone: `gcloud compute reservations list --filter=zone:{zone}`")
    if got.status != 200 or not isinstance(got.body, dict):
        return Finding(name, MISS, _http_problem(got, f"reservation {name_} in {zone}"),
                       "your account needs compute.reservations.get on the project")
    specific = got.body.get("specificReservation") or {}
    reserved_type = (specific.get("instanceProperties") or {}).get("machineType", "")
    count, used = int(specific.get("count", 0)), int(specific.get("inUseCount", 0))
    if reserved_type and reserved_type != machine_type:
        return Finding(name, MISS, f"pool {pool} needs {machine_type}; the reservation holds {reserved_type}",
                       "a reservation of the pool's machine type")
    if got.body.get("status", "READY") != "READY":
        return Finding(name, MISS, f"status {got.body.get('status')}", "wait until it is READY")
    if count - used < vms:
        return Finding(name, MISS, f"{count - used} of {count} free in {zone}; pool {pool} needs {vms}",
                       "free its VMs, or a larger reservation")
    return Finding(name, OK, f"{count - used} of {count} {machine_type} free in {zone} for pool {pool} ({vms})")


def hf_token(model: str, whoami: Got | None, access: Got | None, where: str) -> Finding:
    """The token reads `model` (or, with model '', is valid: a gated dataset's token)."""
    name = f"Hugging Face {model or 'token'}"
    set_it = ("the token in the stack's Secret Manager secret (hfTokenSecret): `printf %s \"$HF_TOKEN\" | gcloud secrets "
              "create hf-token --data-file=-` (a read token: https://huggingface.co/settings/tokens)")
    if whoami is None:
        return Finding(name, MISS, f"no token ({where})", set_it)
    if whoami.status == 401:
        return Finding(name, MISS, "the token is not valid (401)", set_it)
    if whoami.status != 200:
        return Finding(name, WARN, _http_problem(whoami, "the Hub"), "try again: the Hub did not answer")
    user = (whoami.body or {}).get("name", "?") if isinstance(whoami.body, dict) else "?"
    if not model:
        return Finding(name, OK, f"valid, {user}'s")
    if access is not None and access.status in (401, 403):
        return Finding(name, MISS, f"{user}'s token may not read {model} ({access.status}: a gated model)",
                       f"accept its licence at {HUB}/{model} with that account, then try again")
    if access is None or access.status != 200:
        return Finding(name, WARN, _http_problem(access or Got(0), model), "check the model id in the run's args")
    return Finding(name, OK, f"{user}'s token reads {model}")


Check = Callable[[], list[Finding]]
