"""How a resource's Pulumi inputs become one API request: the vocabulary of the mapping tables.

Each Google Cloud resource type the program declares has a `ResourceMapping`
(container.py, compute.py, storage.py, projects.py, registry.py): the API
and method the provider calls to create it, the URL parameters it fills, and
one rule per input path the program sets (wire form, camelCase; `[]` stands
for every item of a list):

- `Field(to)`: sent in the request body at `to` (`[]` takes the input's list
  index, `[0]` is a fixed one), converted where the provider converts;
- `Param(part)`: a part of a URL parameter (`projects/{project}/...`);
- `NotSent(why)`: read by the provider or the bridge only, never sent.

The mapping follows terraform-provider-google-beta's create functions and
their expand functions, cited where a mapping is not one to one.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Convert = Callable[[Any, Mapping[str, Any]], Any]  # (input value, the resource's inputs) -> API value


class NotSendable(ValueError):
    """The provider itself refuses the value before any request (its schema or expand function)."""

    def __init__(self, why: str, allowed: str = ""):
        super().__init__(why)
        self.why, self.allowed = why, allowed


@dataclass(frozen=True)
class Field:
    to: str
    convert: Convert | None = None
    source: str = ""  # the provider function, where the mapping is not one to one


@dataclass(frozen=True)
class Param:
    part: str
    convert: Convert | None = None
    source: str = ""


@dataclass(frozen=True)
class NotSent:
    why: str


Rule = Field | Param | NotSent


@dataclass(frozen=True)
class ResourceMapping:
    type: str  # the Pulumi type token
    api: str  # the discovery document, "container.v1beta1"
    method: str  # the method id the provider calls to create the resource
    params: Mapping[str, str]  # method parameter -> template over the Params' parts
    fields: Mapping[str, Rule]
    source: str  # the provider's create function
    # An input block present implies these API fields (the provider sets them).
    implied: Mapping[str, tuple[tuple[str, Any], ...]] = field(default_factory=dict)
    # The bridge names the resource when the program doesn't (pulumi-gcp provider/resources.go).
    autoname: bool = False


def within(prefix: str, rules: Mapping[str, Rule]) -> dict[str, Rule]:
    """`rules` with every input path moved under `prefix` (a block shared by two resources)."""
    return {f"{prefix}.{path}": rule for path, rule in rules.items()}


def targets(prefix: str, rules: Mapping[str, Rule]) -> dict[str, Rule]:
    """`rules` with every Field sent under `prefix` in the body."""
    return {path: Field(f"{prefix}.{r.to}", r.convert, r.source) if isinstance(r, Field) else r
            for path, r in rules.items()}


# --- converters: what the provider does to a value on its way to the API --------------------


def negated(value: Any, _inputs: Mapping[str, Any]) -> Any:
    return not value if isinstance(value, bool) else value


def each(convert: Convert) -> Convert:
    def converted(value: Any, inputs: Mapping[str, Any]) -> Any:
        return [convert(v, inputs) for v in value] if isinstance(value, list) else value
    return converted


# tpgresource/service_scope.go CanonicalizeServiceScope: gcloud's short names of OAuth scopes.
_SCOPE_ALIASES = {
    "bigquery": "bigquery", "cloud-platform": "cloud-platform", "cloud-source-repos": "source.full_control",
    "cloud-source-repos-ro": "source.read_only", "compute-ro": "compute.readonly", "compute-rw": "compute",
    "datastore": "datastore", "logging-write": "logging.write", "monitoring": "monitoring",
    "monitoring-read": "monitoring.read", "monitoring-write": "monitoring.write", "pubsub": "pubsub",
    "service-control": "servicecontrol", "service-management": "service.management.readonly",
    "sql": "sqlservice", "sql-admin": "sqlservice.admin", "storage-full": "devstorage.full_control",
    "storage-ro": "devstorage.read_only", "storage-rw": "devstorage.read_write", "taskqueue": "taskqueue",
    "trace": "trace.append", "useraccounts-ro": "cloud.useraccounts.readonly", "useraccounts-rw": "cloud.useraccounts",
    "userinfo-email": "userinfo.email",
}


def scope(value: Any, _inputs: Mapping[str, Any]) -> Any:
    alias = _SCOPE_ALIASES.get(value) if isinstance(value, str) else None
    return f"https://www.googleapis.com/auth/{alias}" if alias else value


def _project(inputs: Mapping[str, Any]) -> str:
    project = inputs.get("project")
    return project if isinstance(project, str) else "{provider project}"


def global_link(kind: str) -> Convert:
    """tpgresource.ParseGlobalFieldValue(kind, ...).RelativeLink(): `projects/{p}/global/{kind}/{name}`."""
    pattern = re.compile(rf"projects/([^/]+)/global/{kind}/([^/]+)$")

    def link(value: Any, inputs: Mapping[str, Any]) -> Any:
        if not isinstance(value, str) or not value:
            return value
        found = pattern.search(value)
        project, name = found.groups() if found else (_project(inputs), value.rsplit("/", 1)[-1])
        return f"projects/{project}/global/{kind}/{name}"
    return link


def regional_link(kind: str, region_input: str) -> Convert:
    """tpgresource.ParseRegionalFieldValue(kind, ...).RelativeLink(): `projects/{p}/regions/{r}/{kind}/{name}`."""
    pattern = re.compile(rf"projects/([^/]+)/(?:regions|locations)/([^/]+)/{kind}/([^/]+)$")

    def link(value: Any, inputs: Mapping[str, Any]) -> Any:
        if not isinstance(value, str) or not value:
            return value
        found = pattern.search(value)
        if found:
            return "projects/{}/regions/{}/{}/{}".format(found.group(1), found.group(2), kind, found.group(3))
        return f"projects/{_project(inputs)}/regions/{inputs.get(region_input)}/{kind}/{value.rsplit('/', 1)[-1]}"
    return link


def last_segment(value: Any, _inputs: Mapping[str, Any]) -> Any:
    """A resource named by its id or its name: the name (`projects/p/locations/l/clusters/c` -> `c`)."""
    return value.rsplit("/", 1)[-1] if isinstance(value, str) else value


def one_of(*allowed: str, source: str) -> Convert:
    """A value the provider's own schema limits to `allowed` (not an API field, so Google can't judge it)."""
    def checked(value: Any, _inputs: Mapping[str, Any]) -> Any:
        if value not in allowed:
            raise NotSendable(f"is not a value the provider takes ({source})", ", ".join(allowed))
        return value
    return checked


def autoname(resource_name: str) -> str:
    """The name the bridge gives an unnamed resource: lowercased, a dash, 7 random characters.

    pulumi-gcp provider/resources.go `lowercaseAutoName` (Maxlen 63, Randlen
    7); a stable stand-in for the random part, so the plan doesn't change
    from one run to the next.
    """
    suffix = hashlib.sha256(resource_name.encode()).hexdigest()[:7]
    return f"{resource_name.lower()[:55]}-{suffix}"
