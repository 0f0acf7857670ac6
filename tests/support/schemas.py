"""Offline checks of rendered manifests against the API schemas, unknown fields included.

- The JobSet against the JobSet v0.12.0 CRD schema (jsonschema), made strict:
  an object that lists its properties rejects any other, unless the schema
  says `x-kubernetes-preserve-unknown-fields`. The API server would silently
  prune such a field; here it is an error.
- Each child Job template as a batch/v1 Job with kubernetes-validate in
  strict mode.

The CRD schema is kubernetes-sigs' file and is not part of this repository:
it is read from $JOBSET_SCHEMA, else ../shared/schemas/, else downloaded from
the pinned JobSet release and cached under ~/.cache/gke-finetune/.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import urllib.request
from pathlib import Path

import jsonschema
import kubernetes_validate
import yaml

from core.names import JOBSET_VERSION, KUBERNETES_VERSION
from manifests.jobset import child_jobs

SCHEMA_FILE = f"jobset.x-k8s.io_v1alpha2_jobset.{JOBSET_VERSION}.json"
RELEASE_URL = f"https://github.com/kubernetes-sigs/jobset/releases/download/{JOBSET_VERSION}/manifests.yaml"

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


def _download(target: Path) -> None:
    with urllib.request.urlopen(RELEASE_URL, timeout=60) as response:  # noqa: S310 (pinned https URL)
        documents = yaml.safe_load_all(response.read())
    for doc in documents:
        if doc and doc.get("kind") == "CustomResourceDefinition" and doc["spec"]["names"]["kind"] == "JobSet":
            version = next(v for v in doc["spec"]["versions"] if v["name"] == "v1alpha2")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(version["schema"]["openAPIV3Schema"]))
            return
    raise RuntimeError(f"no JobSet v1alpha2 CRD in {RELEASE_URL}")


def strict(schema: dict) -> dict:
    """A copy of `schema` in which objects with listed properties reject unknown ones."""
    schema = copy.deepcopy(schema)
    schema["properties"]["metadata"] = copy.deepcopy(_OBJECT_META)
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


def manifest_errors(manifest: dict) -> list[str]:
    return jobset_errors(manifest) + job_errors(manifest)
