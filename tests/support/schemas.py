"""Offline checks of rendered manifests against the API schemas, unknown fields included.

- The JobSet against the JobSet v0.12.0 CRD schema (jsonschema), made strict:
  an object that lists its properties rejects any other, unless the schema
  says `x-kubernetes-preserve-unknown-fields`. The API server would silently
  prune such a field; here it is an error.
- Each child Job template as a batch/v1 Job with kubernetes-validate in
  strict mode.
- Each Kueue object against its Kueue v0.19.2 CRD schema (v1beta2), made
  strict the same way.

The CRD schemas are kubernetes-sigs' files and are not part of this
repository: the JobSet's is read from $JOBSET_SCHEMA, the Kueue ones from the
directory $KUEUE_SCHEMAS, else from ../shared/schemas/, else downloaded from
the pinned release (its manifests.yaml) and cached under ~/.cache/gke-finetune/.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
import urllib.request
from pathlib import Path

import jsonschema
import kubernetes_validate
import yaml

from core.names import JOBSET_VERSION, KUEUE_VERSION, KUBERNETES_VERSION
from manifests.jobset import child_jobs

SCHEMA_FILE = f"jobset.x-k8s.io_v1alpha2_jobset.{JOBSET_VERSION}.json"
RELEASE_URL = f"https://github.com/kubernetes-sigs/jobset/releases/download/{JOBSET_VERSION}/manifests.yaml"

KUEUE_RELEASE_URL = f"https://github.com/kubernetes-sigs/kueue/releases/download/{KUEUE_VERSION}/manifests.yaml"
KUEUE_API = "v1beta2"
# The Kueue kinds the platform creates; cluster-scoped but for the LocalQueue.
KUEUE_KINDS = ("ResourceFlavor", "ClusterQueue", "LocalQueue", "AdmissionCheck",
               "ProvisioningRequestConfig", "WorkloadPriorityClass")
NAMESPACED_KINDS = ("LocalQueue",)

ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gke-finetune"

# Only what the builders put in metadata; anything else is a mistake.
_OBJECT_META = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "required": ["name", "namespace"],
}


def schema_path() -> Path:
    """Where the JobSet CRD schema is, downloading it once if no local copy exists."""
    candidates = [os.environ.get("JOBSET_SCHEMA"), ROOT.parent / "shared" / "schemas" / SCHEMA_FILE]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    cached = CACHE_DIR / SCHEMA_FILE
    if not cached.is_file():
        _download(cached)
    return cached


def _download(target: Path, url: str = RELEASE_URL, kind: str = "JobSet", version: str = "v1alpha2") -> None:
    with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 (pinned https URL)
        documents = yaml.safe_load_all(response.read())
    for doc in documents:
        if doc and doc.get("kind") == "CustomResourceDefinition" and doc["spec"]["names"]["kind"] == kind:
            served = next(v for v in doc["spec"]["versions"] if v["name"] == version)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(served["schema"]["openAPIV3Schema"]))
            return
    raise RuntimeError(f"no {kind} {version} CRD in {url}")


def kueue_schema_path(kind: str) -> Path:
    """Where a Kueue kind's CRD schema is, downloading it once if no local copy exists."""
    name = f"kueue.x-k8s.io_{KUEUE_API}_{kind.lower()}.{KUEUE_VERSION}.json"
    directories = [os.environ.get("KUEUE_SCHEMAS"), ROOT.parent / "shared" / "schemas"]
    for directory in directories:
        if directory and (Path(directory) / name).is_file():
            return Path(directory) / name
    cached = CACHE_DIR / name
    if not cached.is_file():
        _download(cached, KUEUE_RELEASE_URL, kind, KUEUE_API)
    return cached


def strict(schema: dict, namespaced: bool = True) -> dict:
    """A copy of `schema` in which objects with listed properties reject unknown ones."""
    schema = copy.deepcopy(schema)
    schema["properties"]["metadata"] = copy.deepcopy(_OBJECT_META)
    if not namespaced:  # a cluster-scoped object has no namespace
        del schema["properties"]["metadata"]["properties"]["namespace"]
        schema["properties"]["metadata"]["required"] = ["name"]
    _close(schema)
    return schema


def _close(node) -> None:
    if isinstance(node, list):
        for item in node:
            _close(item)
        return
    if not isinstance(node, dict):
        return
    if (
        "properties" in node
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        node["additionalProperties"] = False
    for value in node.values():
        _close(value)


@functools.cache
def _jobset_validator() -> jsonschema.Draft7Validator:
    schema = strict(json.loads(schema_path().read_text()))
    return jsonschema.Draft7Validator(schema)


def jobset_errors(manifest: dict) -> list[str]:
    """Every schema violation of a JobSet manifest, as `path: message`."""
    errors = sorted(_jobset_validator().iter_errors(manifest), key=lambda e: list(e.absolute_path))
    return [f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in errors]


def job_errors(manifest: dict) -> list[str]:
    """kubernetes-validate (strict) on every child Job template, wrapped as a batch/v1 Job."""
    errors = []
    for name, job in child_jobs(manifest).items():
        try:
            kubernetes_validate.validate(job, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as err:
            errors.append(f"Job {name}: {err.message}")
    return errors


def _python_patterns(node):
    """The schema with Go's `^(?i)...` patterns written as Python's `(?i)^...` (same meaning)."""
    if isinstance(node, list):
        return [_python_patterns(item) for item in node]
    if not isinstance(node, dict):
        return node
    fixed = {k: _python_patterns(v) for k, v in node.items()}
    if isinstance(fixed.get("pattern"), str) and fixed["pattern"].startswith("^(?i)"):
        fixed["pattern"] = "(?i)^" + fixed["pattern"][len("^(?i)"):]
    return fixed


@functools.cache
def _kueue_validator(kind: str) -> jsonschema.Draft7Validator:
    raw = _python_patterns(json.loads(kueue_schema_path(kind).read_text()))
    schema = strict(raw, namespaced=kind in NAMESPACED_KINDS)
    schema["properties"]["apiVersion"] = {"const": f"kueue.x-k8s.io/{KUEUE_API}"}
    schema["properties"]["kind"] = {"const": kind}
    return jsonschema.Draft7Validator(schema)


def kueue_errors(manifest: dict) -> list[str]:
    """Every schema violation of a Kueue object, as `path: message`; an unknown kind is one."""
    kind = manifest.get("kind")
    if kind not in KUEUE_KINDS:
        return [f"kind: {kind!r} is not one of the Kueue kinds {KUEUE_KINDS}"]
    errors = sorted(_kueue_validator(kind).iter_errors(manifest), key=lambda e: list(e.absolute_path))
    return [f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in errors]


def manifest_errors(manifest: dict) -> list[str]:
    return jobset_errors(manifest) + job_errors(manifest)


# --- the Secret Manager add-on's SecretProviderClass ------------------------------------------------

SECRET_PROVIDER_CLASS_CRD = "secrets-store.csi.x-k8s.io_v1_secretproviderclass.json"
# The type as kubernetes-sigs/secrets-store-csi-driver apis/v1/secretproviderclass_types.go declares it
# (SecretProviderClassSpec: provider, parameters map[string]string, secretObjects): the published CRD is
# not reachable from here (its module is not on the Go module proxy this machine reaches), so this is our
# reading of the type; where ../shared/schemas/ holds the CRD's own schema, that one judges too.
_SPC_SPEC = {
    "type": "object",
    "properties": {
        "provider": {"type": "string"},
        "parameters": {"type": "object", "additionalProperties": {"type": "string"}},
        "secretObjects": {"type": "array", "items": {"type": "object"}},
    },
    "additionalProperties": False,
}
_SPC = {"type": "object", "required": ["apiVersion", "kind", "metadata", "spec"], "additionalProperties": False,
        "properties": {"apiVersion": {"const": "secrets-store.csi.x-k8s.io/v1"},
                       "kind": {"const": "SecretProviderClass"}, "metadata": _OBJECT_META, "spec": _SPC_SPEC}}
# GKE's provider: `secrets` is a YAML list of {resourceName: projects/*/secrets/*/versions/*, path}, each
# written as a file at `path` inside the volume
# (https://cloud.google.com/secret-manager/docs/secret-manager-managed-csi-component).
_VERSION = re.compile(r"projects/[^/]+/secrets/[^/]+/versions/[^/]+")


def secret_provider_class_problems(manifest: dict) -> list[str]:
    """What the API server (strict, as our other schemas) or GKE's provider would refuse in `manifest`."""
    found = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
             for e in jsonschema.Draft7Validator(_SPC).iter_errors(manifest)]
    shared = ROOT.parent / "shared" / "schemas" / SECRET_PROVIDER_CLASS_CRD
    if shared.is_file():
        found += [e.message for e in jsonschema.Draft7Validator(strict(json.loads(shared.read_text()))).iter_errors(manifest)]
    spec = manifest.get("spec") or {}
    if spec.get("provider") != "gke":
        found.append(f"spec.provider: {spec.get('provider')!r} is not GKE's add-on (gke)")
    try:
        secrets = yaml.safe_load((spec.get("parameters") or {}).get("secrets", ""))
    except yaml.YAMLError as err:
        return [*found, f"spec.parameters.secrets: not YAML: {err}"]
    if not isinstance(secrets, list) or not secrets:
        return [*found, "spec.parameters.secrets: not a list of secrets"]
    for i, item in enumerate(secrets):
        item = item if isinstance(item, dict) else {}
        if set(item) - {"resourceName", "path"}:
            found.append(f"secrets[{i}]: unknown keys {sorted(set(item) - {'resourceName', 'path'})}")
        if not _VERSION.fullmatch(str(item.get("resourceName", ""))):
            found.append(f"secrets[{i}].resourceName: {item.get('resourceName')!r} is not a secret version")
        path = str(item.get("path", ""))
        if not path or path.startswith("/") or ".." in path.split("/"):
            found.append(f"secrets[{i}].path: {path!r} is not a file inside the volume")
    return found
