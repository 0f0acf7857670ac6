"""The namespace's rules, judged by the real API server: PodSecurity admission, ResourceQuota and LimitRange.

Every pod every shipped stack makes (each run's template, each staging Job's)
is created as a Pod, on a dry run, in namespaces enforcing each Pod Security
level, with GKE's FUSE sidecar injected by the harness's webhook as GKE does:
the real admission admits it exactly at the levels `admission/pod_security.py`
says, and refuses it at the stricter ones for the reasons the model gives.
Then a real ResourceQuota and LimitRange: pods the model says fit are
created (for real, every pod of a multi-host run), one byte or one chip over
the quota and the API server refuses as the model does, naming the quota;
a pod without limits is refused by a quota on `limits.*`, as the model says.
"""

from __future__ import annotations

import copy
import dataclasses
import re

import pytest

from admission import pod_security, quota
from admission.namespace_needs import level_needs, stack_pod_sets
from admission.pod_security import ENFORCE_LABEL, LEVELS
from core import quantity
from core.names import server_service_account
from e2e.harness import fuse_sidecar
from e2e.harness.kube import ApiError, wait_for
from e2e.harness.session import control_plane
from e2e.harness.tools import ROOT
from e2e.tests.reports import Report
from e2e.tests.settings import LIFETIME
from manifests.ladder import NAME as LADDER_ACCOUNT
from manifests.serving import priority_class
from stack import reader
from tools.offline import SHIPPED_STACKS

POLICY_REPORT = Report("namespace policy")
TOOLS = ("etcd", "kubernetes", "kwok")
# The service accounts the stacks' pods name (the trainer's, the stager's, the model server's, the ladder
# controller's): the ServiceAccount admission plugin wants them to exist.
ACCOUNTS = ("trainer", "stager", "server")


def _pod(template: dict, name: str, namespace: str) -> dict:
    pod = copy.deepcopy(template)
    pod["metadata"] = {**pod.get("metadata", {}), "name": name, "namespace": namespace}
    return {"apiVersion": "v1", "kind": "Pod", **pod}


def _create(kube, pod: dict, dry_run: bool = True) -> None:
    path = kube.path("v1", "Pod", pod["metadata"]["namespace"])
    kube.request("POST", path, pod, query={"dryRun": "All"} if dry_run else None)


def _namespace(kube, name: str, labels: dict, stacks: list) -> None:
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
    for config in stacks:
        for account in (config.trainer_account, config.stager_account, server_service_account(config.stack),
                        LADDER_ACCOUNT):
            kube.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": name}})
        if config.serve is not None:  # the server's pods name the stack's PriorityClass (the Priority plugin)
            kube.apply(priority_class(config.runs_namespace))


@pytest.fixture(scope="module")
def plane(state_root):
    configs = [reader.load_files(stack, ROOT) for stack in SHIPPED_STACKS]
    with control_plane(state_root / "namespace-policy", LIFETIME, tool_names=TOOLS) as cp:
        kube = cp.client()
        fuse_sidecar.start(cp, kube)
        for level in LEVELS:
            _namespace(kube, f"ps-{level}", {ENFORCE_LABEL: level}, configs)
        yield kube, configs


def _reasons(message: str) -> set[str]:
    """The failed checks' reasons in PodSecurity's refusal: `violates PodSecurity "<level>:latest": <reason>
    (<detail>), <reason> (<detail>)`."""
    found = message.split(':latest": ', 1)[1]
    return {r.strip() for r in re.sub(r"\([^()]*(\([^()]*\)[^()]*)*\)", "", found).split(",") if r.strip()}


def test_the_api_server_admits_every_stack_pod_at_exactly_the_level_the_model_gives(plane):
    kube, configs = plane
    seen = 0
    for config in configs:
        for need in level_needs(stack_pod_sets(config)):
            name = f"{config.stack}-{need.pods.name}"[:63].rstrip("-")
            for level in LEVELS:
                pod = _pod(need.pods.pod, name, f"ps-{level}")
                expected = pod_security.strictness(level) >= pod_security.strictness(need.level)
                try:
                    _create(kube, pod)
                    admitted = True
                except ApiError as err:
                    assert err.status == 403 and "violates PodSecurity" in err.message, err
                    admitted = False
                    model = {v.reason for v in pod_security.evaluate(need.pods.pod, level)}
                    assert _reasons(err.message) == model, (name, level, err.message, model)
                assert admitted == expected, (name, level, need.level)
                seen += 1
            POLICY_REPORT.append(f"  {config.stack:<15} {need.pods.what:<40} admitted from {need.level}")
    assert seen >= 3 * len(SHIPPED_STACKS)


def _quota(kube, namespace: str, hard: dict) -> None:
    kube.apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "team", "namespace": namespace},
                "spec": {"hard": hard}})


def _wait_quota(kube, namespace: str, hard: dict) -> None:
    """The quota controller has computed the quota's status: the API server admits pods against it from then."""
    def computed() -> bool:
        status = (kube.get("v1", "ResourceQuota", "team", namespace).get("status") or {}).get("hard") or {}
        return {k: quantity.parse(v) for k, v in status.items()} == {k: quantity.parse(v) for k, v in hard.items()}

    wait_for("the quota's status", computed, 30.0)


def test_a_real_quota_holds_exactly_what_the_model_counts(plane):
    """tpu-multihost's run: two pods, each a TPU host's trainer and FUSE sidecar. A quota of exactly the run's
    limits holds both; one MiB less and the second pod is refused, as the model refuses the run."""
    kube, configs = plane
    config = next(c for c in configs if c.stack == "tpu-multihost")
    [run, _] = stack_pod_sets(config)
    need = quota.pod_set_usage(run)
    hard = {"limits.memory": f"{int(need['limits.memory']) // 2**20}Mi", "limits.cpu": f"{int(need['limits.cpu'])}",
            "requests.google.com/tpu": f"{int(need['requests.google.com/tpu'])}", "pods": "2"}
    _namespace(kube, "quota-fits", {}, [config])
    _quota(kube, "quota-fits", hard)
    _wait_quota(kube, "quota-fits", hard)
    assert quota.quota_problems("quota-fits", [{"metadata": {"name": "team"}, "spec": {"hard": hard}}], [run]) == []
    for i in range(run.count):
        _create(kube, _pod(run.pod, f"host-{i}", "quota-fits"), dry_run=False)

    tight = {**hard, "limits.memory": f"{int(need['limits.memory']) // 2**20 - 1}Mi"}
    _namespace(kube, "quota-short", {}, [config])
    _quota(kube, "quota-short", tight)
    _wait_quota(kube, "quota-short", tight)
    [problem] = quota.quota_problems("quota-short", [{"metadata": {"name": "team"}, "spec": {"hard": tight}}], [run])
    _create(kube, _pod(run.pod, "host-0", "quota-short"), dry_run=False)
    with pytest.raises(ApiError) as refused:
        _create(kube, _pod(run.pod, "host-1", "quota-short"), dry_run=False)
    assert refused.value.status == 403 and 'exceeded quota: team' in refused.value.message
    assert "limits.memory" in refused.value.message and "limits.memory" in str(problem)
    POLICY_REPORT.append(f"  quota {tight['limits.memory']}: {refused.value.message[:160]}")
    POLICY_REPORT.append(f"  the model: {problem}"[:400])


def test_a_quota_on_limits_refuses_a_pod_without_them_as_the_model_says(plane):
    kube, configs = plane
    config = next(c for c in configs if c.stack == "dev")
    [run, staging] = stack_pod_sets(config)
    hard = {"limits.cpu": "1000", "limits.memory": "10Ti"}
    _namespace(kube, "quota-limits", {}, [config])
    _quota(kube, "quota-limits", hard)
    _wait_quota(kube, "quota-limits", hard)
    quotas = [{"metadata": {"name": "team"}, "spec": {"hard": hard}}]
    assert quota.quota_problems("quota-limits", quotas, [run, staging]) == []
    for pods in (run, staging):
        _create(kube, _pod(pods.pod, pods.name, "quota-limits"))
    unlimited = copy.deepcopy(run.pod)
    del unlimited["spec"]["containers"][0]["resources"]["limits"]["cpu"]
    stripped = dataclasses.replace(run, pod=unlimited)
    [problem] = quota.quota_problems("quota-limits", quotas, [stripped])
    with pytest.raises(ApiError) as refused:
        _create(kube, _pod(unlimited, "unlimited", "quota-limits"))
    assert "must specify limits.cpu" in refused.value.message and "sets no limits.cpu" in str(problem)


def test_a_limit_range_refuses_what_the_model_refuses(plane):
    kube, configs = plane
    config = next(c for c in configs if c.stack == "dev")
    [run, _] = stack_pod_sets(config)
    _namespace(kube, "limit-range", {}, [config])
    narrow = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "per-container", "namespace": "limit-range"},
              "spec": {"limits": [{"type": "Container", "max": {"memory": "64Gi"}}]}}
    kube.apply(narrow)
    problems = quota.limit_range_problems("limit-range", [narrow], [run])
    assert [p for p in problems if "container 'trainer' limits memory" in str(p)]
    with pytest.raises(ApiError) as refused:
        _create(kube, _pod(run.pod, "too-big", "limit-range"))
    assert "maximum memory usage per Container is 64Gi" in refused.value.message, refused.value.message
