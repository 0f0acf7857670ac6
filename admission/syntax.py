"""Names, labels, selectors and annotations of a manifest, by Kubernetes' own rules.

kubernetes-validate and the CRD schemas check types and fields, not these
(the API server's validation code does): label keys and values, selector
values, annotation keys and size, and the DNS names of objects, containers,
volumes and ports.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping

from admission.findings import Finding
from core import syntax

SOURCE = "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set"
NAMES_SOURCE = "https://kubernetes.io/docs/concepts/overview/working-with-objects/names/"
ANNOTATIONS_SOURCE = "https://kubernetes.io/docs/concepts/overview/working-with-objects/annotations/#syntax-and-character-set"
OBJECT_SOURCE = "https://etcd.io/docs/v3.6/dev-guide/limit/ (etcd's --max-request-bytes)"
EXEC_SOURCE = "https://man7.org/linux/man-pages/man2/execve.2.html (Limits on size of arguments and environment)"


def metadata_findings(meta: Mapping, where: str) -> Iterator[Finding]:
    """An object's (or a pod template's) labels and annotations."""
    for key, value in (meta.get("labels") or {}).items():
        yield from _key(key, f"{where}.labels", SOURCE)
        problem = syntax.label_value_problem(str(value))
        if problem:
            yield Finding("syntax", f"{where}.labels[{key}]", value, problem, SOURCE)
    annotations = meta.get("annotations") or {}
    for key in annotations:
        yield from _key(key, f"{where}.annotations", ANNOTATIONS_SOURCE)
    size = sum(syntax.utf8_size(k) + syntax.utf8_size(str(v)) for k, v in annotations.items())
    if size > syntax.ANNOTATIONS_MAX_BYTES:
        yield Finding("syntax", f"{where}.annotations", f"{size} bytes",
                      f"exceed the {syntax.ANNOTATIONS_MAX_BYTES} bytes an object's annotations may hold",
                      ANNOTATIONS_SOURCE)


def object_name_findings(meta: Mapping, where: str) -> Iterator[Finding]:
    for field, rule in (("name", syntax.dns_1123_subdomain_problem), ("namespace", syntax.dns_1123_label_problem)):
        if field in meta:
            problem = rule(meta[field])
            if problem:
                yield Finding("syntax", f"{where}.{field}", meta[field], problem, NAMES_SOURCE)


def pod_findings(pod: Mapping, where: str) -> Iterator[Finding]:
    """A pod template: its metadata, selector, tolerations, containers, volumes and ports."""
    yield from metadata_findings(pod.get("metadata") or {}, f"{where}.metadata")
    spec = pod.get("spec") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        yield from _key(key, f"{where}.spec.nodeSelector", SOURCE)
        problem = syntax.label_value_problem(str(value))
        if problem:
            yield Finding("syntax", f"{where}.spec.nodeSelector[{key}]", value, problem, SOURCE)
    for i, toleration in enumerate(spec.get("tolerations") or []):
        if toleration.get("key"):
            yield from _key(toleration["key"], f"{where}.spec.tolerations[{i}].key", SOURCE)
    if spec.get("serviceAccountName"):
        problem = syntax.dns_1123_subdomain_problem(spec["serviceAccountName"])
        if problem:
            yield Finding("syntax", f"{where}.spec.serviceAccountName", spec["serviceAccountName"], problem, NAMES_SOURCE)
    for kind in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(kind) or []):
            yield from _container(container, f"{where}.spec.{kind}[{i}]")
    for i, volume in enumerate(spec.get("volumes") or []):
        problem = syntax.dns_1123_label_problem(volume.get("name", ""))
        if problem:
            yield Finding("syntax", f"{where}.spec.volumes[{i}].name", volume.get("name"), problem, NAMES_SOURCE)


def _container(container: Mapping, where: str) -> Iterator[Finding]:
    problem = syntax.dns_1123_label_problem(container.get("name", ""))
    if problem:
        yield Finding("syntax", f"{where}.name", container.get("name"), problem, NAMES_SOURCE)
    for j, port in enumerate(container.get("ports") or []):
        if "name" in port and syntax.port_name_problem(port["name"]):
            yield Finding("syntax", f"{where}.ports[{j}].name", port["name"], syntax.port_name_problem(port["name"]),
                          NAMES_SOURCE)
    for j, variable in enumerate(container.get("env") or []):
        problem = syntax.env_name_problem(variable.get("name", ""))
        if problem:
            yield Finding("syntax", f"{where}.env[{j}].name", variable.get("name"), problem, NAMES_SOURCE)


def _key(key: str, where: str, source: str) -> Iterator[Finding]:
    problem = syntax.qualified_name_problem(key)
    if problem:
        yield Finding("syntax", where, key, f"is not a valid key: it {problem}", source)


def size_findings(manifest: Mapping) -> Iterator[Finding]:
    """An object larger than etcd stores (a custom resource is stored as its JSON), and a container whose
    command, arguments and environment together are more than Linux starts a process with."""
    size = len(json.dumps(manifest, separators=(",", ":")).encode())
    if size > syntax.OBJECT_MAX_BYTES:
        yield Finding("syntax", "(the whole object)", f"{size} bytes", f"exceed the {syntax.OBJECT_MAX_BYTES} bytes "
                      "etcd stores in one request: the API server would refuse it (\"request is too large\")",
                      OBJECT_SOURCE)
    for i, replicated in enumerate((manifest.get("spec") or {}).get("replicatedJobs") or []):
        spec = replicated["template"]["spec"]["template"].get("spec") or {}
        for j, container in enumerate(spec.get("containers") or []):
            strings = [*(container.get("command") or []), *(container.get("args") or [])]
            strings += [f"{v.get('name')}={v['value']}" for v in container.get("env") or [] if "value" in v]
            total = sum(syntax.utf8_size(str(s)) + 1 for s in strings)
            if total > syntax.ARG_TOTAL_MAX_BYTES:
                yield Finding("syntax", f"spec.replicatedJobs[{i}].template.spec.template.spec.containers[{j}]",
                              f"{total} bytes", f"of command, arguments and environment exceed the "
                              f"{syntax.ARG_TOTAL_MAX_BYTES} bytes a process starts with", EXEC_SOURCE)


def jobset_findings(manifest: Mapping) -> list[Finding]:
    """Every syntax finding of a JobSet: its own metadata, each replicated job's pod template, its size."""
    found = list(object_name_findings(manifest["metadata"], "metadata"))
    found += metadata_findings(manifest["metadata"], "metadata")
    for i, replicated in enumerate(manifest["spec"]["replicatedJobs"]):
        found += pod_findings(replicated["template"]["spec"]["template"],
                              f"spec.replicatedJobs[{i}].template.spec.template")
    return found + list(size_findings(manifest))


def kueue_findings(manifest: Mapping) -> list[Finding]:
    """A Kueue object's name, labels and annotations, and the node labels and toleration keys of a flavor."""
    found = list(object_name_findings(manifest["metadata"], "metadata"))
    found += metadata_findings(manifest["metadata"], "metadata")
    spec = manifest.get("spec") or {}
    for key, value in (spec.get("nodeLabels") or {}).items():
        found += _key(key, "spec.nodeLabels", SOURCE)
        problem = syntax.label_value_problem(str(value))
        if problem:
            found.append(Finding("syntax", f"spec.nodeLabels[{key}]", value, problem, SOURCE))
    for i, toleration in enumerate(spec.get("tolerations") or []):
        if toleration.get("key"):
            found += _key(toleration["key"], f"spec.tolerations[{i}].key", SOURCE)
    return found
