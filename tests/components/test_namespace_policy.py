"""The namespace's reads before anything is declared (components/namespace_policy.py): what a 403 leaves
unchecked is said, never skipped in silence. The real API server's answers are the e2e's
(e2e/tests/test_namespace_policy.py); here a stand-in client answers as it does."""

from __future__ import annotations

from types import SimpleNamespace

from kubernetes import client as k8s_client
from kubernetes.client.rest import ApiException

from components import namespace_policy


class _Core:
    """CoreV1Api's three reads: the namespace, then a 403 on quotas and a LimitRange list."""

    def __init__(self, _api):
        pass

    def read_namespace(self, name, _request_timeout):
        assert _request_timeout == namespace_policy.TIMEOUT
        return SimpleNamespace(metadata=SimpleNamespace(labels={"pod-security.kubernetes.io/enforce": "baseline"}))

    def list_namespaced_resource_quota(self, namespace, _request_timeout):
        raise ApiException(status=403, reason="Forbidden")

    def list_namespaced_limit_range(self, namespace, _request_timeout):
        return SimpleNamespace(items=[{"metadata": {"name": "lr"}, "spec": {"limits": []}}])


def test_a_forbidden_read_is_said_and_the_rest_is_read(monkeypatch):
    monkeypatch.setattr(k8s_client, "CoreV1Api", _Core)
    api = SimpleNamespace(sanitize_for_serialization=lambda item: item)
    facts = namespace_policy.read_namespace(api, "team-a")
    assert facts.labels == {"pod-security.kubernetes.io/enforce": "baseline"}
    assert facts.quotas is None and facts.limit_ranges == [{"metadata": {"name": "lr"}, "spec": {"limits": []}}]
    [line] = facts.not_checked
    assert line.startswith("not checked: the namespace's ResourceQuotas (403 Forbidden")


def test_a_namespace_that_does_not_exist_is_left_to_the_namespace_check(monkeypatch):
    class Missing(_Core):
        def read_namespace(self, name, _request_timeout):
            raise ApiException(status=404, reason="Not Found")

    monkeypatch.setattr(k8s_client, "CoreV1Api", Missing)
    facts = namespace_policy.read_namespace(SimpleNamespace(), "team-c")
    assert facts.labels is None and facts.quotas is None and facts.not_checked == []
