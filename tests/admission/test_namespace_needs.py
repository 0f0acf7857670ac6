"""What a stack's pods need from their namespace, and the problems of a namespace that would refuse them:
its Pod Security level, its ResourceQuotas and LimitRanges (admission/namespace_needs.py, admission/quota.py).

Each bad case fires with one problem naming the key, what the namespace holds and who changes it; the
e2e (e2e/tests/test_namespace_policy.py) holds the same judgements to the real API server."""

from __future__ import annotations

import pytest

from admission import namespace_needs, quota
from admission.namespace_needs import level_needs, needed_level, pod_security_problems, stack_pod_sets
from admission.pod_security import BASELINE, ENFORCE_LABEL, PRIVILEGED, RESTRICTED
from components.namespace_policy import NamespaceFacts, namespace_problems
from core import quantity
from stack import reader
from tools.offline import ROOT


def config(stack: str):
    return reader.load_files(stack, ROOT)


@pytest.mark.parametrize(("stack", "level"), [("a4", RESTRICTED), ("dev", BASELINE), ("tpu-queued", BASELINE),
                                              ("tpu-multislice", PRIVILEGED)])
def test_each_shipped_stack_needs_the_level_its_accelerator_allows(stack, level):
    assert needed_level(config(stack)) == level


def test_the_stack_s_pod_sets_are_its_runs_pods_and_its_staging_jobs():
    sets = stack_pod_sets(config("tpu-multislice"))
    assert [(s.key, s.name, s.count, s.jobs) for s in sets] == [
        ("runs[0]", "gemma3-multislice", 4, 2), ("datasets[0]", "tinystories", 1, 1)]


def test_a_namespace_enforcing_a_stricter_level_refuses_the_run_and_says_who_changes_what():
    needs = level_needs(stack_pod_sets(config("dev")))
    [problem] = pod_security_problems("team-a", {ENFORCE_LABEL: RESTRICTED}, needs)
    text = str(problem)
    assert text.startswith("runs[0]: 'gemma3-single-host' needs Pod Security level 'baseline' (runAsNonRoot != true")
    assert "namespace 'team-a' enforces 'restricted'" in text
    assert f"the platform team labels the namespace `kubectl label namespace team-a {ENFORCE_LABEL}=baseline" in text
    assert pod_security_problems("team-a", {ENFORCE_LABEL: BASELINE}, needs) == []
    assert pod_security_problems("team-a", {}, needs) == []  # no label: privileged, as on GKE


def test_multislice_s_host_network_needs_a_privileged_namespace():
    needs = level_needs(stack_pod_sets(config("tpu-multislice")))
    [problem] = pod_security_problems("team-a", {ENFORCE_LABEL: BASELINE}, needs)
    assert "needs Pod Security level 'privileged' (host namespaces (hostNetwork=true)" in str(problem)


def test_a_label_that_is_no_level_is_refused():
    [problem] = pod_security_problems("team-a", {ENFORCE_LABEL: "strict"}, [])
    assert "no Pod Security level" in str(problem)


def _quota(hard: dict, used: dict | None = None, **spec) -> dict:
    return {"metadata": {"name": "team-quota"}, "spec": {"hard": hard, **spec}, "status": {"used": used or {}}}


def test_a_run_counts_every_host_s_pod_with_its_fuse_sidecar():
    [run, staging] = stack_pod_sets(config("tpu-multihost"))
    usage = quota.pod_set_usage(run)
    trainer = run.pod["spec"]["containers"][0]["resources"]["limits"]
    sidecar = run.pod["metadata"]["annotations"]["gke-gcsfuse/memory-limit"]
    assert usage["pods"] == 2 and usage["requests.google.com/tpu"] == 8
    assert usage["limits.memory"] == 2 * (quantity.parse(trainer["memory"]) + quantity.parse(sidecar))
    assert usage["limits.cpu"] == usage["requests.cpu"] == 2 * (float(trainer["cpu"]) + 2)
    # The staging Job: the larger of its init container and its container, with the sidecar.
    assert quota.pod_set_usage(staging)["requests.memory"] == quantity.parse("8Gi") + quantity.parse("512Mi")


def test_a_quota_too_small_for_a_run_is_a_problem_naming_the_quota_and_its_key():
    sets = stack_pod_sets(config("tpu-multihost"))
    need = quota.pod_set_usage(sets[0])["limits.memory"]
    small = _quota({"limits.memory": str(int(need) - 1), "pods": "10"})
    [problem] = quota.quota_problems("team-a", [small], sets)
    text = str(problem)
    assert text.startswith("runs[0]: 'gemma3-multi-host' needs limits.memory")
    assert "more than ResourceQuota 'team-quota' of namespace 'team-a' allows" in text
    assert "the platform team raises the quota's spec.hard.limits.memory to at least" in text
    assert quota.quota_problems("team-a", [_quota({"limits.memory": str(int(need)), "pods": "10"})], sets) == []


def test_a_quota_on_the_accelerator_and_on_pods_counts_the_whole_run():
    sets = stack_pod_sets(config("tpu-multihost"))
    problems = quota.quota_problems("team-a", [_quota({"requests.google.com/tpu": "4", "pods": "1"})], sets)
    assert {str(p).split(" needs ")[1].split(" (")[0] for p in problems} == {"requests.google.com/tpu 8", "pods 2"}


def test_what_others_use_is_no_refusal():
    """The stack's own running pods are in a quota's `used`: only `hard` is judged."""
    sets = stack_pod_sets(config("dev"))
    full = _quota({"requests.google.com/tpu": "4"}, {"requests.google.com/tpu": "4"})
    assert quota.quota_problems("team-a", [full], sets) == []


def test_a_quota_outside_the_pods_scope_does_not_count_them():
    sets = stack_pod_sets(config("dev"))
    for spec in ({"scopes": ["BestEffort"]}, {"scopes": ["Terminating"]},
                 {"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In",
                                                          "values": ["high"]}]}}):
        assert quota.quota_problems("team-a", [_quota({"pods": "0"}, **spec)], sets) == [], spec
    in_scope = _quota({"pods": "0"}, scopes=["NotBestEffort", "NotTerminating"])
    assert len(quota.quota_problems("team-a", [in_scope], sets)) == 2  # the run and the staging Job


def test_a_limit_range_maximum_under_a_container_s_limit_is_a_problem():
    sets = stack_pod_sets(config("dev"))
    narrow = {"metadata": {"name": "per-container"}, "spec": {"limits": [
        {"type": "Container", "max": {"memory": "64Gi"}}, {"type": "Pod", "max": {"cpu": "8"}}]}}
    problems = [str(p) for p in quota.limit_range_problems("team-a", [narrow], sets)]
    assert any("container 'trainer' limits memory" in p and "over its max 64Gi" in p for p in problems)
    assert any("the pod limits cpu" in p for p in problems)
    assert all("LimitRange 'per-container' of namespace 'team-a'" in p for p in problems)
    wide = {"metadata": {"name": "wide"}, "spec": {"limits": [
        {"type": "Container", "max": {"memory": "4Ti"}, "min": {"cpu": "100m"}, "maxLimitRequestRatio": {"cpu": "1"}}]}}
    assert quota.limit_range_problems("team-a", [wide], sets) == []


def test_the_namespace_check_judges_what_it_read_and_says_what_it_could_not_read():
    cfg = config("existing-dev")
    facts = NamespaceFacts(labels={ENFORCE_LABEL: RESTRICTED}, quotas=None, limit_ranges=[],
                           not_checked=["not checked: the namespace's ResourceQuotas (403 Forbidden: ...)"])
    problems, warnings = namespace_problems(cfg, facts)
    assert [p.key for p in problems] == ["runs[0]"] and warnings == facts.not_checked
    created = cfg.model_copy(update={"create_namespace": True})
    assert namespace_problems(created, facts)[0] == []  # a namespace the stack declares, it labels itself
    assert namespace_needs.enforced_level({}) == PRIVILEGED


def test_the_model_server_s_pods_are_judged_with_the_runs():
    sets = stack_pod_sets(config("a4"))
    [served] = [s for s in sets if s.key == "serve"]
    assert (served.name, served.count, served.jobs) == ("gemma4-sql", 1, 0)
    assert served.pod["spec"]["containers"][0]["name"] == "vllm"
    # vLLM on a GPU runs as uid 1000 with every capability dropped: the server asks no more than the run does.
    needs = {s.key: n for s, n in zip(sets, level_needs(sets))}
    assert needs["serve"].level == "restricted" and needs["serve"].refused == ()
