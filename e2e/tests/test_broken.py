"""Deliberately broken objects fail the e2e with the API server's, a webhook's or the scheduler's own reason.

Each case breaks one thing of a shipped object and goes through the same
calls the stack tests make (`apply_one`, `wait_bound`), so a stack carrying
the same mistake fails `make e2e` with the same words.
"""

from __future__ import annotations

import copy

import pytest

from e2e.harness.apply import apply_one
from e2e.harness.kube import ApiError
from e2e.tests.scenario import pod_spec, refused_by_scheduler, variant

SINGLE_HOST_RUN = "gemma3-single-host"


def _too_big(jobset: dict) -> None:
    resources = pod_spec(jobset)["containers"][0]["resources"]
    resources["requests"]["cpu"] = resources["limits"]["cpu"] = "1000"  # a limit under its request is invalid


def _wrong_selector(jobset: dict) -> None:
    pod_spec(jobset)["nodeSelector"]["gke-finetune/pool"] = "v6e-1x1-typo"


def _no_tolerations(jobset: dict) -> None:
    pod_spec(jobset)["tolerations"] = []


@pytest.mark.parametrize(("case", "change", "reason"), [
    ("too-big", _too_big, "Insufficient cpu"),
    ("wrong-selector", _wrong_selector, "didn't match Pod's node affinity/selector"),
    ("no-toleration", _no_tolerations, "untolerated taint"),
])
def test_a_pod_the_scheduler_cannot_place_fails_with_its_reason(queued, submitted, case, change, reason):
    _, kube, runs = queued
    run = submitted(variant(runs[SINGLE_HOST_RUN], f"broken-{case}", change))
    said = refused_by_scheduler(kube, run)
    assert reason in said, said


def test_a_typo_in_a_kueue_field_is_refused_by_the_api_server(queued):
    cp, kube, _ = queued
    queue = copy.deepcopy(kube.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", "finetune"))
    broken = {"apiVersion": queue["apiVersion"], "kind": "ClusterQueue",
              "metadata": {"name": "broken-typo"}, "spec": copy.deepcopy(queue["spec"])}
    broken["spec"]["queueingStrategyy"] = broken["spec"].pop("queueingStrategy")
    with pytest.raises(ApiError) as failure:
        apply_one(kube, broken)
    assert ".spec.queueingStrategyy: field not declared in schema" in failure.value.message, failure.value


def test_a_jobset_the_webhook_refuses_fails_with_the_webhook_reason(queued, submitted):
    _, kube, runs = queued

    def duplicate_rule(jobset: dict) -> None:
        rules = jobset["spec"]["failurePolicy"]["rules"]
        rules.append(copy.deepcopy(rules[0]))

    with pytest.raises(ApiError) as failure:
        submitted(variant(runs[SINGLE_HOST_RUN], "broken-webhook", duplicate_rule))
    # The chart's name for JobSet's validating webhook (charts/jobset, v0.12.0).
    assert 'admission webhook "validate-jobset-x-k8s-io-v1alpha2-jobset.x-k8s.io" denied the request' \
        in failure.value.message, failure.value
    assert "rule names are not unique" in failure.value.message, failure.value
