"""The ClusterQueues already on a cluster that admit runs to the stack's pools: an overcommitted pool is refused
before anything is declared (admission/shared_pools.py, read by components/preflight.py)."""

from __future__ import annotations

import copy

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.rest import ApiException

from admission.shared_pools import overcommit_problems
from components import preflight
from manifests.kueue import cluster_queue_name, kueue_manifests
from stack import reader
from tests.support.pulumi_harness import ROOT


def _stack(namespace: str, quota: dict | None):
    """The existing-cluster stack (one TPU v6e 1x1 node pool, one node: 1 chip), its run through Kueue."""
    values = copy.deepcopy(reader.model_values(reader.file_values("existing-dev", ROOT), "existing-dev"))
    [pool], [run] = values["pools"], values["runs"]
    values["pools"] = [{**pool, **({"quota": quota} if quota is not None else {})}]
    values["runs"] = [{**run, "priority": "normal"}]
    return reader.validate({**values, "namespace": namespace})


def _on_cluster(*stacks) -> tuple[list[dict], list[dict]]:
    """The ClusterQueues and ResourceFlavors those stacks put on the cluster."""
    objects = [m for s in stacks for m in kueue_manifests(s.kueue_flavors()).values()]
    return [m for m in objects if m["kind"] == "ClusterQueue"], [m for m in objects if m["kind"] == "ResourceFlavor"]


def _problems(cfg, queues, flavors) -> list[str]:
    keys = {p.name: f"pools[{i}]" for i, p in enumerate(cfg.pools)}
    found = overcommit_problems(cfg.kueue_flavors(), keys, cluster_queue_name(cfg.runs_namespace), queues, flavors)
    return [str(p) for p in found]


def test_a_second_team_taking_the_whole_pool_is_refused_naming_the_other_queue_and_what_to_change():
    """Team A's queue holds the pool's one chip; team B's stack, without a quota, would hold it too: its pods
    would wait for a node that never comes. Refused, naming A's queue, its quota, and B's key with what fits."""
    queues, flavors = _on_cluster(_stack("team-a", None))
    [message] = _problems(_stack("team-b", None), queues, flavors)
    assert message.startswith("pools[0].quota.chips: not set, the stack's queue taking all of pool 'v6e-1x1' "
                              "(1 chips), and the cluster's other queues on it hold 1 chips (ClusterQueue 'team-a' "
                              "(1 chips on flavor "), message
    assert "no cohort" in message and "allowed: at most 0 chips here (this team: `quota: {chips: 0}`" in message
    assert "their owners: the stack whose namespace names the queue, or the platform team" in message


def test_shares_that_fit_the_pool_together_pass_and_one_more_is_refused():
    a = _stack("team-a", {"chips": 1})
    queues, flavors = _on_cluster(a)
    assert _problems(_stack("team-b", {"chips": 0}), queues, flavors) == []  # borrows A's idle chip, in A's cohort
    [message] = _problems(_stack("team-b", {"chips": 1}), queues, flavors)
    assert "cohort 'gke-finetune-shared-" in message and "would admit 2 chips" in message
    # The stack's own queue, there from an earlier `up`, is not another team's.
    assert _problems(a, queues, flavors) == []


def test_a_queue_of_the_platform_teams_on_the_pools_nodes_counts_and_a_label_free_flavor_does_not():
    cfg = _stack("team-b", {"chips": 1})
    contract = cfg.kueue_flavors()[0]
    on_pool = {"metadata": {"name": "tpu"}, "spec": {"nodeLabels": {contract.pool_label: contract.pool_values[0]}}}
    anywhere = {"metadata": {"name": "default"}, "spec": {}}
    queue = {"metadata": {"name": "platform"}, "spec": {"resourceGroups": [{"flavors": [
        {"name": "tpu", "resources": [{"name": "google.com/tpu", "nominalQuota": "1"}]},
        {"name": "default", "resources": [{"name": "google.com/tpu", "nominalQuota": "64"}]}]}]}}
    [message] = _problems(cfg, [queue], [on_pool, anywhere])
    assert "ClusterQueue 'platform' (1 chips on flavor 'tpu', no cohort)" in message
    assert "'default'" not in message


def _cluster_with(monkeypatch, queues=(), flavors=(), status=None):
    """Kueue's objects as the API server lists them (or refuses, with `status`); no namespace labels and no
    controllers read."""

    class Objects:
        def __init__(self, api):
            pass

        def list_cluster_custom_object(self, group, version, plural, _request_timeout):
            assert (group, version) == ("kueue.x-k8s.io", "v1beta2")
            if status:
                raise ApiException(status=status, reason="Forbidden" if status == 403 else "Not Found")
            return {"items": {"clusterqueues": list(queues), "resourceflavors": list(flavors)}[plural]}

    monkeypatch.setattr(preflight.k8s_client, "CustomObjectsApi", Objects)
    monkeypatch.setattr(preflight, "read_namespace_labels", lambda api, namespace: {})
    monkeypatch.setattr(preflight, "read_controllers", lambda api, not_checked, owners: {})


def test_the_preflight_reads_the_queues_and_refuses_before_anything_is_declared(monkeypatch):
    _cluster_with(monkeypatch, *_on_cluster(_stack("team-a", None)))
    [problem] = preflight.shared_pool_problems(_stack("team-b", None), k8s_client.ApiClient())
    assert problem.key == "pools[0].quota.chips"


@pytest.mark.parametrize("status,said", [(403, True), (404, False)])
def test_a_forbidden_read_is_not_checked_and_no_kueue_is_no_queue(monkeypatch, status, said):
    _cluster_with(monkeypatch, status=status)
    found, not_checked = preflight.cluster_problems(_stack("team-b", None), k8s_client.ApiClient())
    assert found == []
    assert bool(not_checked) is said
    if said:
        assert not_checked[0].startswith("not checked: the other ClusterQueues on the stack's pools"), not_checked
        assert "403 Forbidden" in not_checked[0], not_checked


def test_the_preflight_of_an_existing_cluster_runs_the_check(monkeypatch):
    """Wired into the preflight's reads (components/preflight.py `cluster_problems`): the overcommit is one of
    the problems `pulumi preview` stops on, with the namespace and controllers read as before."""
    _cluster_with(monkeypatch, *_on_cluster(_stack("team-a", None)))
    problems, not_checked = preflight.cluster_problems(_stack("team-b", None), k8s_client.ApiClient())
    assert [p.key for p in problems] == ["pools[0].quota.chips"] and not_checked == []
