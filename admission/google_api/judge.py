"""Every declared Google Cloud resource as the request it becomes, judged by Google's definition.

    findings = resources_findings([(type_token, name, inputs), ...])

A finding names the resource, the input path (as the program and `pulumi
preview` spell it), the API field it becomes, the value, what is wrong and
what Google allows. Also a finding: a Google Cloud resource type with no
mapping, an input no rule covers, a value the provider itself refuses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from admission.google_api import compute, container, discovery, projects, registry, storage, validate
from admission.google_api.request import Request, build
from admission.google_api.rules import ResourceMapping

MAPPINGS: dict[str, ResourceMapping] = {m.type: m for m in (
    container.CLUSTER, container.NODE_POOL,
    compute.NETWORK, compute.SUBNETWORK, compute.ROUTER, compute.ROUTER_NAT, compute.FIREWALL,
    storage.BUCKET, storage.BUCKET_IAM_MEMBER, storage.BUCKET_OBJECT, storage.FOLDER,
    projects.SERVICE, projects.SERVICE_ACCOUNT, projects.PROJECT_IAM_MEMBER, projects.SECRET_IAM_MEMBER,
    registry.REPOSITORY, registry.REPOSITORY_IAM_MEMBER,
)}
SOURCE = "https://developers.google.com/discovery/v1/reference/apis"
UNCOVERED = "is not in the mapping to Google's API (admission/google_api): add its rule, following the provider"


def is_google_cloud(type_token: str) -> bool:
    """A resource the Google Cloud provider creates (not a provider resource, not a component)."""
    return type_token.startswith("gcp:")


@dataclass(frozen=True)
class ApiFinding:
    resource: str  # the Pulumi resource name
    type: str  # its type token
    input_path: str  # `placementPolicy.type`, "" when none (a required field nobody sets)
    api_field: str  # `nodePool.placementPolicy.type`, or `parameter parent`
    value: Any
    why: str
    allowed: str
    definition: str  # `container v1beta1 rev 20261027 container.projects.locations.clusters.nodePools.create`

    @property
    def key(self) -> str:
        return f"{self.resource} ({self.type}) {self.input_path or self.api_field}"

    @property
    def reason(self) -> str:
        """What is wrong, with where Google's definition says so."""
        return f"{self.why} [API field {self.api_field}, {self.definition}]"

    def __str__(self) -> str:
        allowed = f"; allowed: {self.allowed}" if self.allowed else ""
        return f"{self.key}: {self.value!r} {self.reason}{allowed}"


def resources_findings(resources: Iterable[tuple[str, str, Mapping[str, Any]]]) -> list[ApiFinding]:
    found = []
    for type_token, name, inputs in resources:
        found += resource_findings(type_token, name, inputs)
    return found


def resource_findings(type_token: str, name: str, inputs: Mapping[str, Any]) -> list[ApiFinding]:
    if not is_google_cloud(type_token):
        return []
    mapping = MAPPINGS.get(type_token)
    if mapping is None:
        return [ApiFinding(name, type_token, "", "(the whole resource)", type_token,
                           "is a Google Cloud resource type with no mapping to Google's API (admission/google_api)",
                           ", ".join(sorted(MAPPINGS)), "no definition")]
    return request_findings(build(mapping, name, inputs))


def request_findings(request: Request) -> list[ApiFinding]:
    mapping = request.mapping
    definition = f"{discovery.label(mapping.api)} {mapping.method}"
    violations = (validate.parameter_violations(mapping.api, mapping.method, request.params)
                  + validate.body_violations(mapping.api, mapping.method, request.body))

    def finding(input_path: str, api_field: str, value: Any, why: str, allowed: str) -> ApiFinding:
        return ApiFinding(request.name, mapping.type, input_path, api_field, value, why, allowed, definition)

    found = [finding(_origin(request, v.where), v.where, v.value, v.why, v.allowed) for v in violations]
    found += [finding(r.input_path, "(none: refused by the provider)", r.value, r.why, r.allowed)
              for r in request.refusals]
    judged = {f.input_path for f in found}
    found += [finding(path, _placed(request, path), value, UNCOVERED, "")
              for path, value in request.uncovered if path not in judged]
    return found


def deprecation_notes(request: Request) -> list[ApiFinding]:
    """What the request sends that Google's definition marks deprecated (accepted: notes, not findings)."""
    mapping = request.mapping
    definition = f"{discovery.label(mapping.api)} {mapping.method}"
    return [ApiFinding(request.name, mapping.type, _origin(request, v.where), v.where, v.value, v.why, "", definition)
            for v in sorted(validate.deprecations(mapping.api, mapping.method, request.body), key=lambda v: v.where)]


def _origin(request: Request, api_field: str) -> str:
    """The input an API field came from: its own, its enclosing field's, or the block its fields came from."""
    path = api_field
    while path:
        if path in request.origins:
            return request.origins[path]
        path = path.rpartition(".")[0] if "." in path else path.rpartition("[")[0]
    inner = [o.split(".") for k, o in request.origins.items() if k.startswith((f"{api_field}.", f"{api_field}["))]
    common = []
    for parts in zip(*inner):
        if len(set(parts)) > 1:
            break
        common.append(parts[0])
    return ".".join(common)


def _placed(request: Request, input_path: str) -> str:
    return next((api for api, origin in request.origins.items() if origin == input_path), "(not placed)")
