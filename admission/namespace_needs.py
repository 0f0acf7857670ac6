"""What a stack's pods need from the namespace they run in: its Pod Security level, and room in its quota.

Every pod the stack makes there, each run's (one per host and slice), each
dataset's staging Job's, the model server's and the ladder controller's, built by the builders the program applies. The level
the namespace must allow is the least strict level that admits all of them
(admission/pod_security.py); what a quota must hold is in admission/quota.py.
The namespace's own labels and quota come from the cluster (components/namespace_policy.py
reads them); the problems name what to change and who changes it: a
namespace's labels and quotas are the platform team's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from admission import pod_security
from admission.pod_security import ENFORCE_LABEL, PRIVILEGED, Violation
from admission.serving import serve_manifests
from manifests.ladder import controller_manifests
from manifests.run import build_runs, platform_facts
from manifests.staging import stack_staging_jobs
from stack.config import StackConfig
from stack.images import offline_images
from stack.problems import Problem

SOURCE = pod_security.SOURCE


@dataclass(frozen=True)
class PodSet:
    """The pods of one run or staging Job: what they are, their template, how many run at once."""

    key: str  # the stack key that declares them: runs[i], datasets[i]
    name: str  # the run's or dataset's name
    what: str  # "run 'x'", "dataset 'y' (its staging Job)"
    pod: Mapping  # the pod template (metadata and spec)
    count: int  # pods at once
    jobs: int = 1  # batch/v1 Jobs (a JobSet makes one per slice)


def stack_pod_sets(config: StackConfig) -> list[PodSet]:
    """Every run's pods and every staging Job's pod, as the program would declare them."""
    images = offline_images(config)
    manifests = build_runs(config.runs, config.contracts(), platform_facts(config, images))
    sets = []
    for i, run in enumerate(config.runs):
        for replicated in manifests[run.name]["spec"]["replicatedJobs"]:
            job = replicated["template"]["spec"]
            sets.append(PodSet(f"runs[{i}]", run.name, f"run {run.name!r}", job["template"],
                               job["parallelism"] * replicated["replicas"], replicated["replicas"]))
    staging = stack_staging_jobs(config, images)
    for i, dataset in enumerate(config.datasets):
        if dataset.name in staging:
            sets.append(PodSet(f"datasets[{i}]", dataset.name, f"dataset {dataset.name!r} (its staging Job)",
                               staging[dataset.name]["spec"]["template"], 1))
    for manifest in serve_manifests(config).values():  # the model server's pods (`serve:`)
        if manifest["kind"] == "Deployment":
            sets.append(PodSet("serve", config.serve.run, f"the server of run {config.serve.run!r}",
                               manifest["spec"]["template"], manifest["spec"]["replicas"], 0))
    for manifest in controller_manifests(config).values():  # the ladder controller's pod (manifests/ladder.py)
        if manifest["kind"] == "Deployment":
            sets.append(PodSet("runs", manifest["metadata"]["name"], "the ladder controller of the runs' ladders",
                               manifest["spec"]["template"], manifest["spec"]["replicas"], 0))
    return sets


@dataclass(frozen=True)
class LevelNeed:
    """The level a pod set needs, and what the stricter levels refuse in it."""

    pods: PodSet
    level: str
    refused: tuple[Violation, ...]

    def why(self) -> str:
        return "; ".join(str(v) for v in self.refused) or "admitted by every level"


def level_needs(sets: list[PodSet]) -> list[LevelNeed]:
    needs = []
    for pods in sets:
        level, refused = pod_security.least_level(pods.pod)
        needs.append(LevelNeed(pods, level, tuple(refused)))
    return needs


def needed_level(config: StackConfig) -> str:
    """The least strict Pod Security level the stack's namespace must enforce at most (restricted when it has
    no pod)."""
    needs = level_needs(stack_pod_sets(config))
    return max((n.level for n in needs), key=pod_security.strictness, default=pod_security.RESTRICTED)


def enforced_level(labels: Mapping[str, str]) -> str:
    """The level a namespace enforces: its label's, else privileged (the API server's default, which a cluster's
    AdmissionConfiguration may change; GKE sets none: a namespace without the label admits every pod).
    https://kubernetes.io/docs/concepts/security/pod-security-admission/#pod-security-admission-labels-for-namespaces"""
    return labels.get(ENFORCE_LABEL, PRIVILEGED)


def pod_security_problems(namespace: str, labels: Mapping[str, str], needs: list[LevelNeed]) -> list[Problem]:
    """Each pod set the namespace's enforced level would refuse once its Job creates the pods."""
    enforced = enforced_level(labels)
    if enforced not in pod_security.LEVELS:  # the API server refuses such a label itself
        return [Problem("namespace", namespace, f"has {ENFORCE_LABEL}={enforced!r}, no Pod Security level",
                        "the platform team sets it to restricted, baseline or privileged")]
    problems = []
    for need in needs:
        if pod_security.strictness(need.level) > pod_security.strictness(enforced):
            problems.append(Problem(
                need.pods.key, need.pods.name,
                f"needs Pod Security level {need.level!r} ({need.why()}), and namespace {namespace!r} enforces "
                f"{enforced!r} ({ENFORCE_LABEL}): its pods would be refused once `pulumi up` had created its "
                f"{'JobSet' if need.pods.key.startswith('runs') else 'Job'} ({SOURCE})",
                f"the platform team labels the namespace `kubectl label namespace {namespace} "
                f"{ENFORCE_LABEL}={need.level} --overwrite`, or the stack drops {need.pods.what}"))
    return problems
