"""A platform team's JobSet and Kueue, judged against the stack's namespace and runs (controllers: existing)."""

from __future__ import annotations

import pytest

from admission.installed_controllers import kueue_config_problems, selects, version_problems
from manifests.controllers import kueue_manager_config

WHERE = "ConfigMap kueue-system/kueue-manager-config"


def test_a_kueue_that_manages_the_namespace_with_the_jobset_integration_passes():
    assert kueue_config_problems(kueue_manager_config("team-a"), "team-a", {}, [], WHERE) == []
    shared = {**kueue_manager_config("x"), "managedJobsNamespaceSelector": {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "kueue-system"]}]}}
    assert kueue_config_problems(shared, "team-a", {}, [], WHERE) == []


def test_a_namespace_kueue_doesnt_manage_is_refused_naming_what_the_platform_team_changes():
    [problem] = kueue_config_problems(kueue_manager_config("team-a"), "team-b", {}, [], WHERE)
    assert str(problem).startswith("existingCluster.controllers: 'existing' but the installed Kueue "
                                   f"({WHERE}) does not manage namespace 'team-b'")
    assert "ask the platform team to change ConfigMap kueue-system/kueue-manager-config: make " \
        "managedJobsNamespaceSelector select 'team-b'" in str(problem)


def test_a_kueue_without_the_jobset_integration_is_refused():
    config = {**kueue_manager_config("team-a"), "integrations": {"frameworks": ["batch/job"]}}
    [problem] = kueue_config_problems(config, "team-a", {}, [], WHERE)
    assert "has no JobSet integration" in str(problem)


def test_manage_jobs_without_queue_name_refuses_runs_that_dont_go_through_kueue():
    config = {**kueue_manager_config("team-a"), "manageJobsWithoutQueueName": True}
    [problem] = kueue_config_problems(config, "team-a", {}, ["plain-run"], WHERE)
    assert "runs ['plain-run'] (not sent through Kueue) would be suspended" in str(problem)
    assert kueue_config_problems(config, "team-a", {}, [], WHERE) == []  # every run queued: fine


@pytest.mark.parametrize("selector,labels,expected", [
    (None, {}, True),
    ({"matchLabels": {"team": "a"}}, {"team": "a"}, True),
    ({"matchLabels": {"team": "a"}}, {"team": "b"}, False),
    ({"matchExpressions": [{"key": "team", "operator": "Exists"}]}, {}, False),
    ({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}, {}, True),
    ({"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}]}, {"team": "b"}, True),
])  # fmt: skip
def test_label_selectors_select_as_kubernetes_does(selector, labels, expected):
    assert selects(selector, labels) is expected


def test_a_controller_version_outside_the_pinned_minor_is_refused():
    assert version_problems("kueue", ["registry.k8s.io/kueue/kueue:v0.19.5"]) == []
    [problem] = version_problems("kueue", ["registry.k8s.io/kueue/kueue:v0.13.4", "sidecar:1.0"])
    assert "the installed kueue is v0.13.4, and the stack's objects are written for v0.19.x" in str(problem)
    assert version_problems("jobset", ["registry.k8s.io/jobset/jobset@sha256:abc"]) == []  # no tag: not judged
