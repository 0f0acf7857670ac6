"""The reads of an existing cluster before a stack declares anything there (components/preflight.py)."""

from __future__ import annotations

import socket
import threading
import time
from types import SimpleNamespace

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.rest import ApiException

from admission.shared_cluster import owner_values
from components import preflight
from stack.problems import ConfigError


def _deployment(annotations: dict) -> dict:
    return {"metadata": {"name": "jobset-controller-manager", "annotations": annotations}}


def test_the_owner_is_read_from_the_controllers_deployment_never_a_secret(monkeypatch):
    asked = []

    class AppsV1:
        def __init__(self, api):
            pass

        def list_namespaced_deployment(self, namespace, _request_timeout):
            asked.append((namespace, _request_timeout))
            return SimpleNamespace(items=[_deployment(owner_values("jobset", "team-a", "a")["controller"]["annotations"])])

    class NoSecrets:
        def __init__(self, api):
            pass

        def __getattr__(self, name):
            raise AssertionError(f"the preflight read {name}: a read-only identity may not")

    monkeypatch.setattr(preflight.k8s_client, "AppsV1Api", AppsV1)
    monkeypatch.setattr(preflight.k8s_client, "CoreV1Api", NoSecrets)
    not_checked: list[str] = []
    assert preflight._owner(k8s_client.ApiClient(), ("jobset-system", "jobset"), not_checked) == {
        "namespace": "team-a", "stack": "a"}
    assert asked == [("jobset-system", preflight.TIMEOUT)] and not_checked == []


def test_a_forbidden_read_is_said_as_not_checked(monkeypatch):
    class AppsV1:
        def __init__(self, api):
            pass

        def list_namespaced_deployment(self, namespace, _request_timeout):
            raise ApiException(status=403, reason="Forbidden")

    monkeypatch.setattr(preflight.k8s_client, "AppsV1Api", AppsV1)
    not_checked: list[str] = []
    assert preflight._owner(k8s_client.ApiClient(), ("kueue-system", "kueue"), not_checked) is None
    assert not_checked == ["not checked: who installed Helm release 'kueue' (403 Forbidden on the Deployments of "
                           "namespace 'kueue-system')"]


def _client(port: int) -> k8s_client.ApiClient:
    configuration = k8s_client.Configuration(host=f"https://127.0.0.1:{port}")
    configuration.retries = False
    return k8s_client.ApiClient(configuration)


def test_a_closed_port_stops_the_preview_naming_the_server_and_the_context():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConfigError) as err:
        preflight.reach(_client(port), "context 'team-a'")
    [problem] = err.value.problems
    assert str(problem).startswith(f"existingCluster: 'context \\'team-a\\'' did not answer at https://127.0.0.1:{port}") \
        or f"did not answer at https://127.0.0.1:{port}" in str(problem)
    assert "context 'team-a'" in str(problem)


def test_a_server_that_accepts_and_never_answers_stops_within_the_read_timeout(monkeypatch):
    """It used to stall about 80 s per read (the client's default: no timeout, 3 retries)."""
    monkeypatch.setattr(preflight, "TIMEOUT", (1, 1))
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    held = []
    threading.Thread(target=lambda: held.append(server.accept()), daemon=True).start()
    try:
        started = time.monotonic()
        with pytest.raises(ConfigError):
            preflight.reach(_client(server.getsockname()[1]), "context 'silent'")
        assert time.monotonic() - started < 30  # one try with its timeouts, not four without
    finally:
        server.close()
        for conn, _ in held:
            conn.close()
