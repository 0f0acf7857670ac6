"""Would a namespace's ResourceQuotas and LimitRanges admit the stack's pods? As the API server counts them.

A ResourceQuota's `spec.hard` caps what the namespace's non-terminal pods
request and limit together (`requests.cpu` or `cpu`, `limits.memory`,
`requests.<extended resource>`, `pods`, `count/<resource>.<group>`); a pod the
quota can't hold is refused when its Job creates it. A pod counts its
effective requests and limits (its containers, native sidecars included, or
its largest init container), GKE's injected FUSE sidecar among them
(k8s.io/kubernetes pkg/quota/v1/evaluator/core/pods.go, which sums
component-helpers' `PodRequests` and `PodLimits`). A quota with `scopes` or a
`scopeSelector` counts only the pods in its scope: the stack's pods request
resources (NotBestEffort), set no `activeDeadlineSeconds` (NotTerminating), no
priority class and no cross-namespace affinity.
https://kubernetes.io/docs/concepts/policy/resource-quotas/

A LimitRange's `Container` items bound each container's requests (`min`),
limits (`max`) and their ratio (`maxLimitRequestRatio`); its `Pod` items the
pod's sums. https://kubernetes.io/docs/concepts/policy/limit-range/

A run must fit a quota's `hard` on its own: its pods start together, and a
quota that can't hold them never will. What other pods already use
(`status.used`, the stack's own running pods among them) is not judged: the
Job controller creates a refused pod again once the quota has room.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from admission import fit
from admission.namespace_needs import PodSet
from core import quantity
from stack.problems import Problem

QUOTA_SOURCE = "https://kubernetes.io/docs/concepts/policy/resource-quotas/"
LIMIT_SOURCE = "https://kubernetes.io/docs/concepts/policy/limit-range/"
COMPUTE = ("cpu", "memory", "ephemeral-storage")
JOBSETS = "count/jobsets.jobset.x-k8s.io"
JOBS = "count/jobs.batch"
# The scopes the stack's pods are in (ResourceQuota `scopes`, `scopeSelector` scopeName).
IN_SCOPES = {"NotBestEffort": True, "NotTerminating": True, "BestEffort": False, "Terminating": False,
             "CrossNamespacePodAffinity": False}


def _parse(value) -> float:
    return float(quantity.parse(str(value)))


def _shown(resource: str, value: float) -> str:
    if resource.endswith("cpu"):
        return quantity.show_cpu(value)
    if resource in ("pods",) or resource.startswith("count/") or "/" in resource:
        return f"{value:g}"
    return quantity.show_bytes(value)


def containers(pod: Mapping) -> list[tuple[str, dict[str, float], dict[str, float]]]:
    """(name, requests, limits) of each container the pod will have: its own and GKE's FUSE sidecar."""
    spec = pod.get("spec") or {}
    out = []
    for c in [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]:
        resources = c.get("resources") or {}
        out.append((c["name"], {r: _parse(v) for r, v in (resources.get("requests") or {}).items()},
                    {r: _parse(v) for r, v in (resources.get("limits") or {}).items()}))
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if annotations.get(fit.FUSE_ANNOTATION) == "true":
        out.append(("gke-gcsfuse-sidecar", fit.fuse_sidecar_requests(annotations), fit.fuse_sidecar_limits(annotations)))
    return out


def pod_usage(pod: Mapping) -> dict[str, float]:
    """What one pod counts against a quota, by quota resource name: its effective requests and limits (a limit
    only where every container sets it) and its extended resources' requests."""
    usage, listed = {"pods": 1.0}, containers(pod)
    requests, limits = fit.effective(pod), fit.effective(pod, "limits")
    for resource in COMPUTE:
        usage[resource] = usage[f"requests.{resource}"] = requests[resource]
        if all(resource in limited for _, _, limited in listed):
            usage[f"limits.{resource}"] = limits[resource]
    for resource in {r for _, asked, _ in listed for r in asked} - set(COMPUTE):
        usage[f"requests.{resource}"] = sum(asked.get(resource, 0.0) for _, asked, _ in listed)
    return usage


def pod_set_usage(pods: PodSet) -> dict[str, float]:
    usage = {key: value * pods.count for key, value in pod_usage(pods.pod).items()}
    usage[JOBS] = float(pods.jobs)
    return usage


def applies(quota: Mapping) -> bool:
    """Whether the quota counts the stack's pods (its scopes and scope selector)."""
    spec = quota.get("spec") or {}
    if not all(IN_SCOPES.get(scope, False) for scope in spec.get("scopes") or ()):
        return False
    for expression in (spec.get("scopeSelector") or {}).get("matchExpressions") or ():
        scope, operator = expression.get("scopeName"), expression.get("operator")
        if scope == "PriorityClass":  # the stack's pods name no priority class
            if operator in ("In", "Exists"):
                return False
        elif not IN_SCOPES.get(scope, False) and operator != "DoesNotExist":
            return False
    return True


def _missing(quota: Mapping, usage: Mapping[str, float]) -> list[str]:
    """Quota resources the pods don't set, which makes the quota refuse them ("must specify ...")."""
    hard = (quota.get("spec") or {}).get("hard") or {}
    return [r for r in hard if r.startswith("limits.") and r not in usage]


def quota_problems(namespace: str, quotas: Iterable[Mapping], sets: list[PodSet]) -> list[Problem]:
    """Each run or staging Job a quota of the namespace can't hold even when nothing else uses it."""
    problems = []
    jobsets = float(sum(1 for s in sets if s.key.startswith("runs")))
    for quota in (q for q in quotas if applies(q)):
        name, hard = quota["metadata"]["name"], (quota.get("spec") or {}).get("hard") or {}
        for pods in sets:
            usage = {**pod_set_usage(pods), JOBSETS: jobsets}
            for resource in _missing(quota, usage):
                problems.append(Problem(pods.key, pods.name, f"sets no {resource} on every container, and "
                                        f"ResourceQuota {name!r} of namespace {namespace!r} counts it ({QUOTA_SOURCE})",
                                        "a quota on what the pods set (the platform team)"))
            for resource, limit in hard.items():
                need = usage.get(resource)
                if need is not None and need > _parse(limit):
                    problems.append(Problem(
                        pods.key, pods.name,
                        f"needs {resource} {_shown(resource, need)} ({pods.count} pod(s)), more than ResourceQuota "
                        f"{name!r} of namespace {namespace!r} allows ({_shown(resource, _parse(limit))}): its pods "
                        f"would be refused once `pulumi up` had created them ({QUOTA_SOURCE})",
                        f"the platform team raises the quota's spec.hard.{resource} to at least "
                        f"{_shown(resource, need)}, or the stack runs {pods.what} on fewer or smaller nodes"))
    return problems


def _limit_checks(item: Mapping, what: str, requests: Mapping[str, float], limits: Mapping[str, float]) -> list[str]:
    found = []
    for resource, bound in (item.get("max") or {}).items():
        if limits.get(resource, 0.0) > _parse(bound):
            found.append(f"{what} limits {resource} {_shown(resource, limits[resource])}, over its max {bound}")
    for resource, bound in (item.get("min") or {}).items():
        if requests.get(resource, 0.0) < _parse(bound):
            found.append(f"{what} requests {resource} {_shown(resource, requests.get(resource, 0.0))}, under its "
                         f"min {bound}")
    for resource, ratio in (item.get("maxLimitRequestRatio") or {}).items():
        if requests.get(resource) and limits.get(resource, 0.0) / requests[resource] > _parse(ratio):
            found.append(f"{what}'s {resource} limit is over {ratio} times its request")
    return found


def limit_range_problems(namespace: str, limit_ranges: Iterable[Mapping], sets: list[PodSet]) -> list[Problem]:
    """Each run or staging Job whose containers or pod a LimitRange of the namespace refuses."""
    problems = []
    for limit_range in limit_ranges:
        name = limit_range["metadata"]["name"]
        for pods in sets:
            listed = containers(pods.pod)
            found = []
            for item in (limit_range.get("spec") or {}).get("limits") or ():
                if item.get("type") == "Container":
                    for container, requests, limits in listed:
                        found += _limit_checks(item, f"container {container!r}", requests, limits)
                elif item.get("type") == "Pod":
                    usage = pod_usage(pods.pod)
                    found += _limit_checks(item, "the pod", {r: usage.get(f"requests.{r}", 0.0) for r in COMPUTE},
                                           {r: usage.get(f"limits.{r}", 0.0) for r in COMPUTE})
            problems += [Problem(pods.key, pods.name, f"{line}: LimitRange {name!r} of namespace {namespace!r} "
                                 f"would refuse its pods ({LIMIT_SOURCE})",
                                 "the platform team widens the LimitRange, or the stack runs it on smaller nodes")
                         for line in found]
    return problems
