"""Controllers a platform team installed (`existingCluster.controllers: existing`), judged against what the
stack's runs need before anything is declared.

A Kueue the stack didn't install has its own configuration, the
`controller_manager_config.yaml` of its manager ConfigMap
(`<release>-manager-config`, charts/kueue/templates/manager/manager-config.yaml
of sigs.k8s.io/kueue v0.19.2). Its `managedJobsNamespaceSelector` decides
which namespaces' jobs Kueue manages: a queued JobSet in a namespace it
doesn't select is never admitted and stays suspended for ever, while `up`
reports success. Its `integrations.frameworks` must hold the JobSet
integration, or Kueue ignores JobSets altogether. With
`manageJobsWithoutQueueName: true`, Kueue also suspends a JobSet without a
queue name in a managed namespace, so a run the stack doesn't send through
Kueue would never start. (apis/config/v1beta2/configuration_types.go.)
The controllers' versions are their Deployments' image tags; the stack's
objects are written for the minor versions it pins (core/names.py).

Pure functions over what components/preflight.py reads.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from core.names import JOBSET_VERSION, KUEUE_VERSION
from stack.problems import Problem

JOBSET_FRAMEWORK = "jobset.x-k8s.io/jobset"
CONFIG_KEY = "controller_manager_config.yaml"
SUPPORTED = {"jobset": JOBSET_VERSION, "kueue": KUEUE_VERSION}
_TAG = re.compile(r":v?(\d+)\.(\d+)\.(\d+)")


def selects(selector: Mapping | None, labels: Mapping[str, str]) -> bool:
    """Whether a Kubernetes label selector selects an object with `labels` (a missing selector selects all).
    https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#resources-that-support-set-based-requirements"""
    if selector is None:
        return True
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or ():
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or ()
        if (operator == "In" and labels.get(key) not in values) or (operator == "NotIn" and labels.get(key) in values) \
                or (operator == "Exists" and key not in labels) or (operator == "DoesNotExist" and key in labels):
            return False
    return True


def kueue_config_problems(config: Mapping, namespace: str, labels: Mapping[str, str], unqueued_runs: list[str],
                          where: str) -> list[Problem]:
    """The installed Kueue's configuration (`where`: its ConfigMap) against the stack's namespace and runs."""
    key, ask = "existingCluster.controllers", f"ask the platform team to change {where}"
    problems = []
    if JOBSET_FRAMEWORK not in ((config.get("integrations") or {}).get("frameworks") or ()):
        problems.append(Problem(key, "existing", f"but the installed Kueue ({where}) has no JobSet integration "
                                f"({JOBSET_FRAMEWORK} not in integrations.frameworks): it would never admit a run",
                                f"{ask}: add {JOBSET_FRAMEWORK} to integrations.frameworks"))
    labels = {"kubernetes.io/metadata.name": namespace, **labels}
    managed = selects(config.get("managedJobsNamespaceSelector"), labels)
    if not managed:
        problems.append(Problem(key, "existing", f"but the installed Kueue ({where}) does not manage namespace "
                                f"{namespace!r} (its managedJobsNamespaceSelector doesn't select it): the stack's "
                                "queued runs would stay suspended for ever",
                                f"{ask}: make managedJobsNamespaceSelector select {namespace!r}"))
    if managed and config.get("manageJobsWithoutQueueName") and unqueued_runs:
        problems.append(Problem(key, "existing", f"but the installed Kueue ({where}) has manageJobsWithoutQueueName: "
                                f"true, so runs {unqueued_runs} (not sent through Kueue) would be suspended and never "
                                "admitted", f"{ask}: manageJobsWithoutQueueName false, or give every run a "
                                "priority or ladder (so it goes through Kueue)"))
    return problems


def version_problems(controller: str, images: list[str]) -> list[Problem]:
    """A controller's Deployment images against the minor version the stack's objects are written for."""
    found = [m.groups() for m in (_TAG.search(i) for i in images) if m]
    if not found:
        return []  # no version in the tag (a digest, a mirror's own tags): the plan says not checked
    want = SUPPORTED[controller].removeprefix("v").split(".")[:2]
    major, minor, patch = found[0]
    if [major, minor] != want:
        return [Problem("existingCluster.controllers", "existing", f"but the installed {controller} is "
                        f"v{major}.{minor}.{patch}, and the stack's objects are written for "
                        f"v{'.'.join(want)}.x ({SUPPORTED[controller]})",
                        f"ask the platform team for {controller} v{'.'.join(want)}.x")]
    return []
