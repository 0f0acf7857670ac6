"""The policies of the pack: the admission rules of admission/, over the resources a stack declares.

Each validation is a plain function `(args, report_violation)`; the pack
(policy/__main__.py) registers them. Values still unknown at preview are
skipped rather than guessed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from admission import autopilot, fit, syntax
from admission.google_api.judge import is_google_cloud, resource_findings
from admission.node_pools import node_pool_findings
from admission.nodes import autopilot_node, autopilot_shape, compute_class_selector, pod_chips, pool_node
from core.catalog import COMPUTE_CLASS_LABEL
from core.names import POOL_LABEL

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
COMPUTE_CLASS = "kubernetes:cloud.google.com/v1:ComputeClass"

Report = Callable[[str, Any], None]


def _known_jobset(props: Mapping) -> dict | None:
    spec, meta = props.get("spec"), props.get("metadata")
    if not isinstance(spec, Mapping) or not isinstance(meta, Mapping):
        return None
    if not isinstance(spec.get("replicatedJobs"), list):
        return None
    return {"metadata": meta, "spec": spec}


def _pods(manifest: Mapping):
    for i, replicated in enumerate(manifest["spec"]["replicatedJobs"]):
        pod = (((replicated.get("template") or {}).get("spec") or {}).get("template")) or {}
        yield f"spec.replicatedJobs[{i}].template.spec.template", pod


def validate_jobset_syntax(args, report_violation: Report) -> None:
    manifest = _known_jobset(args.props)
    if manifest is None:
        return
    for finding in syntax.jobset_findings(manifest):
        report_violation(str(finding), None)


def validate_node_pool(args, report_violation: Report) -> None:
    for finding in node_pool_findings(args.props):
        report_violation(str(finding), None)


def validate_google_api(args, report_violation: Report) -> None:
    """The request a Google Cloud resource becomes, against Google's definition of the API method.

    A value unknown at preview (another resource's output) is left to the
    engine, not judged: pulumi_policy raises `UnknownValueError` on reading
    one (pulumi_policy/proxy.py), which `_plain` turns back into unknown.
    """
    if not is_google_cloud(args.resource_type):
        return
    for finding in resource_findings(args.resource_type, args.name, _plain(args.props)):
        report_violation(str(finding), None)


def _plain(value: Any) -> Any:
    """The engine's read-guarding mappings and lists as plain ones, with None where a value is unknown."""
    if isinstance(value, Mapping):
        return {key: _plain(_read(value, key)) for key in value}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_plain(_read(value, i)) for i in range(len(value))]
    return value


def _read(container: Any, key: Any) -> Any:
    try:
        return container[key]
    except Exception as err:  # noqa: BLE001 (only the unknown-value error is expected here)
        if type(err).__name__ == "UnknownValueError":
            return None
        raise


def validate_runs_fit(args, report_violation: Report) -> None:
    """Every run's pods against their nodes: a Standard pool's, or the shape Autopilot provisions."""
    resources = list(args.resources)
    is_autopilot = any(r.resource_type == CLUSTER and r.props.get("enableAutopilot") is True for r in resources)
    nodes = dict(filter(None, (pool_node(r.props) for r in resources if r.resource_type == NODE_POOL)))
    classes = {(r.props.get("metadata") or {}).get("name"): compute_class_selector(r.props.get("spec") or {})
               for r in resources if r.resource_type == COMPUTE_CLASS}
    for resource in resources:
        manifest = _known_jobset(resource.props) if resource.resource_type == JOBSET else None
        if manifest is None:
            continue
        for where, pod in _pods(manifest):
            for finding in _pod_findings(pod, where, nodes, is_autopilot, classes):
                report_violation(f"{resource.name}: {finding}", resource.urn)


def _pod_findings(pod: Mapping, where: str, nodes: Mapping, is_autopilot: bool, classes: Mapping):
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    if is_autopilot:
        selector = {**classes.get(selector.get(COMPUTE_CLASS_LABEL), {}), **selector}
        shape = autopilot_shape(selector, pod_chips(pod))
        if shape is None:
            return []
        return [*fit.fit_findings(pod, autopilot_node(shape), f"{where}.requests"),
                *autopilot.autopilot_findings(pod, shape.accelerator, where)]
    node = nodes.get(selector.get(POOL_LABEL))
    return fit.fit_findings(pod, node, f"{where}.requests") if node is not None else []
