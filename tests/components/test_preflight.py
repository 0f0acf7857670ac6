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


def _existing_queued_config():
    import yaml  # pylint: disable=import-outside-toplevel

    from stack import reader  # pylint: disable=import-outside-toplevel
    from tools.offline import ROOT, PROJECT  # pylint: disable=import-outside-toplevel

    values = reader.file_values("existing-dev", ROOT)
    runs = yaml.safe_load((ROOT / "Pulumi.existing-dev.yaml").read_text())["config"][f"{PROJECT}:runs"]
    values.update({f"{PROJECT}:runs": [{**runs[0], "priority": "high"}],
                   f"{PROJECT}:existingCluster": {"context": "c", "controllers": "existing"}})
    return reader.validate(reader.model_values(values, "existing-dev"))


def test_the_installed_controllers_are_read_by_name_and_a_forbidden_config_map_is_not_checked(monkeypatch):
    """With `controllers: existing` the preview reads each Deployment and Kueue's manager ConfigMap by the name
    its chart gives it (what `make handoff` grants, `get` by name); a 403 on one says `not checked`, naming it."""
    from admission.shared_cluster import Installed  # pylint: disable=import-outside-toplevel

    asked = []

    class AppsV1:
        def __init__(self, api):
            pass

        def read_namespaced_deployment(self, name, namespace, _request_timeout):
            asked.append(("deployment", namespace, name))
            image = f"registry.k8s.io/{name.split('-')[0]}/{name.split('-')[0]}:v0.12.0"
            return SimpleNamespace(spec=SimpleNamespace(template=SimpleNamespace(spec=SimpleNamespace(
                containers=[SimpleNamespace(image=image)]))))

    class CoreV1:
        def __init__(self, api):
            pass

        def read_namespaced_config_map(self, name, namespace, _request_timeout):
            asked.append(("configmap", namespace, name))
            raise ApiException(status=403, reason="Forbidden")

    monkeypatch.setattr(preflight.k8s_client, "AppsV1Api", AppsV1)
    monkeypatch.setattr(preflight.k8s_client, "CoreV1Api", CoreV1)
    found = {"jobset": Installed("jobset", "jobset-validating", ("jobset-system", "jobset")),
             "kueue": Installed("kueue", "kueue-validating", ("kueue-system", "kueue"))}
    not_checked: list[str] = []
    problems = preflight.installed_problems(_existing_queued_config(), k8s_client.ApiClient(), found,
                                            {"kubernetes.io/metadata.name": "ml-team"}, not_checked)
    assert asked == [("deployment", "jobset-system", "jobset-controller"),
                     ("deployment", "kueue-system", "kueue-controller-manager"),
                     ("configmap", "kueue-system", "kueue-manager-config")]
    [kueue_version] = problems  # JobSet's image is v0.12.0; the stand-in's Kueue image v0.12.0 too, not v0.19
    assert "kueue" in str(kueue_version) and "v0.12.0" in str(kueue_version), kueue_version
    assert not_checked == ["not checked: Kueue's configuration (ConfigMap kueue-system/kueue-manager-config) "
                           "(403 Forbidden: the stack's credentials may not read it); the cluster itself refuses "
                           "what it must"]
