"""Google's definitions of its APIs: the discovery documents the pinned client library ships.

`google-api-python-client` (requirements.txt) bundles one discovery document
per API version under googleapiclient/discovery_cache/documents/, read here
with the library's own `get_static_doc`; nothing of them is copied into this
repository. A document lists every method (its parameters, each with its
location, pattern and whether it is required, and its request schema) and
every schema (each field's type, format, enum, and whether it is output only
or required). https://developers.google.com/discovery/v1/reference/apis
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from googleapiclient.discovery_cache import get_static_doc

# The pinned client's package, named in findings so a reader knows which definitions judged.
CLIENT = "google-api-python-client"


class DiscoveryError(LookupError):
    """The pinned client has no such API, method or schema: the mapping names one Google doesn't define."""


@functools.cache
def document(api: str) -> Mapping[str, Any]:
    """The discovery document of `api` ("container.v1beta1", "compute.beta", ...)."""
    name, _, version = api.partition(".")
    text = get_static_doc(name, version)
    if text is None:
        raise DiscoveryError(f"{CLIENT} ships no discovery document for {api}")
    return json.loads(text)


def revision(api: str) -> str:
    return str(document(api).get("revision", ""))


def label(api: str) -> str:
    """`container v1beta1 rev 20261027`: which definition judged."""
    name, _, version = api.partition(".")
    return f"{name} {version} rev {revision(api)}"


def _methods(resources: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for resource in resources.values():
        for method in (resource.get("methods") or {}).values():
            yield method["id"], method
        yield from _methods(resource.get("resources") or {})


@functools.cache
def _method_index(api: str) -> Mapping[str, Mapping[str, Any]]:
    return dict(_methods(document(api).get("resources") or {}))


def method(api: str, method_id: str) -> Mapping[str, Any]:
    """A method by its id, e.g. `container.projects.locations.clusters.nodePools.create`."""
    found = _method_index(api).get(method_id)
    if found is None:
        raise DiscoveryError(f"{label(api)} defines no method {method_id}")
    return found


def schema(api: str, name: str) -> Mapping[str, Any]:
    found = (document(api).get("schemas") or {}).get(name)
    if found is None:
        raise DiscoveryError(f"{label(api)} defines no schema {name}")
    return found


def resolve(api: str, node: Mapping[str, Any]) -> Mapping[str, Any]:
    """A schema node with its `$ref` followed (a field whose type is another schema)."""
    while "$ref" in node:
        node = schema(api, node["$ref"])
    return node


def request_schema(api: str, method_id: str) -> Mapping[str, Any]:
    """The schema of a method's request body ({} for a method that takes none)."""
    request = method(api, method_id).get("request")
    return resolve(api, request) if request else {}


def schema_name(api: str, node: Mapping[str, Any]) -> str:
    """The name Google gives a node's schema (`PlacementPolicy`), or its `id`, or ""."""
    if "$ref" in node:
        return node["$ref"]
    return str(node.get("id", ""))


def output_only(field: Mapping[str, Any]) -> bool:
    """Whether Google computes the field: `readOnly`, or a description that says so.

    container, iam and artifactregistry mark such fields `readOnly` and begin
    their description with "Output only."; compute begins it with "[Output Only]".
    """
    description = str(field.get("description", "")).lstrip().lower()
    return bool(field.get("readOnly")) or description.startswith(("output only", "[output only]", "[output-only]"))


def required(field: Mapping[str, Any], method_id: str) -> bool:
    """Whether Google requires the field in `method_id`'s request.

    compute and storage list the methods that require a field in its
    `annotations.required`; the other APIs begin the field's description
    with "Required." (AIP-203, https://google.aip.dev/203#required).
    """
    if method_id in ((field.get("annotations") or {}).get("required") or ()):
        return True
    return str(field.get("description", "")).lstrip().startswith("Required.")


# Fields whose allowed values Google gives in the field's description rather
# than as an `enum`, with the phrase that lists them.
_DESCRIBED = {
    # "Currently, 'inherited' and 'enforced' are supported."
    ("storage.v1", "Bucket.iamConfiguration.publicAccessPrevention"):
        re.compile(r"Currently, (.+?) (?:is|are) supported"),
}


def described_values(api: str, owner: str, field: Mapping[str, Any]) -> tuple[str, ...]:
    """The values a field's description lists as the only ones supported (empty for other fields)."""
    phrase = _DESCRIBED.get((api, owner))
    if phrase is None:
        return ()
    match = phrase.search(str(field.get("description", "")))
    values = tuple(re.findall(r"'([^']+)'", match.group(1))) if match else ()
    if not values:
        raise DiscoveryError(f"{label(api)} no longer lists the values of {owner} in its description: "
                             f"{field.get('description')!r}")
    return values
