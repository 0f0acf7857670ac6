"""The controllers' Helm values and webhook ports, checked against the pinned charts themselves."""

import re

import yaml

from manifests.controllers import (
    JOBSET_WEBHOOK_PORT,
    KUEUE_VISIBILITY_PORT,
    KUEUE_WEBHOOK_PORT,
    kueue_chart_values,
    kueue_manager_config,
    webhook_ports,
)
from tests.support.charts import chart_file, default_values


def test_kueue_manages_only_jobsets_in_the_runs_namespace():
    config = yaml.safe_load(kueue_chart_values("team-a")["managerConfig"]["controllerManagerConfigYaml"])
    assert config["integrations"] == {"frameworks": ["jobset.x-k8s.io/jobset"]}
    assert config["managedJobsNamespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}


def test_the_chart_defaults_reach_every_namespace_and_kind_and_ours_keep_the_rest():
    """Why the values exist: the chart's own configuration manages pods, Deployments and
    StatefulSets cluster-wide; everything else of it is kept as the chart has it."""
    chart = yaml.safe_load(default_values("kueue")["managerConfig"]["controllerManagerConfigYaml"])
    assert {"pod", "deployment", "statefulset", "batch/job"} <= set(chart["integrations"]["frameworks"])
    assert "managedJobsNamespaceSelector" not in chart
    ours = kueue_manager_config("finetune")
    ours_only = ("integrations", "managedJobsNamespaceSelector", "waitForPodsReady")
    assert {k: v for k, v in ours.items() if k not in ours_only} == {
        k: v for k, v in chart.items() if k != "integrations"}
    assert "waitForPodsReady" not in chart  # off in the chart: admitted runs whose nodes never come wait for ever


def test_the_kueue_the_stack_installs_evicts_and_requeues_runs_whose_pods_are_not_ready():
    from stack.sharing import KueueSettings
    ready = kueue_manager_config("finetune")["waitForPodsReady"]
    assert ready == {"timeout": "1800s", "blockAdmission": False, "requeuingStrategy": {
        "timestamp": "Eviction", "backoffLimitCount": 10, "backoffBaseSeconds": 60, "backoffMaxSeconds": 3600}}
    settings = KueueSettings.model_validate({"podsReadyTimeoutSeconds": 600, "requeueLimit": 3})
    ready = kueue_manager_config("finetune", settings)["waitForPodsReady"]
    assert ready["timeout"] == "600s" and ready["requeuingStrategy"]["backoffLimitCount"] == 3


def test_the_kueue_chart_scopes_its_webhooks_by_the_configured_selector():
    webhooks = chart_file("kueue", "templates/webhook/manifests.yaml")
    scoped = webhooks.count('{{- if (hasKey $managerConfig "managedJobsNamespaceSelector") }}')
    assert scoped >= 10  # every job kind's mutating and validating webhook
    # The pod, Deployment and StatefulSet webhooks fail closed only when their framework is on.
    for framework in ("pod", "deployment", "statefulset"):
        assert f'{{{{- if has "{framework}" $integrationsConfig.frameworks }}}}' in webhooks


def test_the_webhook_ports_are_the_charts():
    deployment = chart_file("jobset", "templates/controller/deployment.yaml")
    assert re.search(r"- name: webhook\s+containerPort: (\d+)", deployment).group(1) == str(JOBSET_WEBHOOK_PORT)
    visibility = chart_file("kueue", "templates/visibility/service.yaml")
    assert re.search(r"targetPort: (\d+)", visibility).group(1) == str(KUEUE_VISIBILITY_PORT)
    assert kueue_manager_config("finetune")["webhook"]["port"] == KUEUE_WEBHOOK_PORT
    assert webhook_ports(kueue=False) == (JOBSET_WEBHOOK_PORT,)
    assert set(webhook_ports(kueue=True)) == {JOBSET_WEBHOOK_PORT, KUEUE_WEBHOOK_PORT, KUEUE_VISIBILITY_PORT}

