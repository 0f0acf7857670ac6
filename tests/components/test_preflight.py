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
from stack.controller_releases import ControllerInstall
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


def _existing_queued_config(**existing):
    import yaml  # pylint: disable=import-outside-toplevel

    from stack import reader  # pylint: disable=import-outside-toplevel
    from tools.offline import ROOT, PROJECT  # pylint: disable=import-outside-toplevel

    values = reader.file_values("existing-dev", ROOT)
    runs = yaml.safe_load((ROOT / "Pulumi.existing-dev.yaml").read_text())["config"][f"{PROJECT}:runs"]
    values.update({f"{PROJECT}:runs": [{**runs[0], "priority": "high"}],
                   f"{PROJECT}:existingCluster": {"context": "c", "controllers": "existing", **existing}})
    return reader.validate(reader.model_values(values, "existing-dev"))


class _Controllers:
    """The controllers' Deployments (JobSet's image v0.12.0, Kueue's `kueue_version`) and Kueue's manager
    ConfigMap (refused with `config_map_status`), each read by name; what was asked, in order."""

    def __init__(self, monkeypatch, config_map_status: int = 404, kueue_version: str = "v0.19.2"):
        self.asked: list[tuple[str, str, str]] = []
        this = self

        class AppsV1:
            def __init__(self, api):
                pass

            def read_namespaced_deployment(self, name, namespace, _request_timeout):
                this.asked.append(("deployment", namespace, name))
                project, version = ("kueue", kueue_version) if "kueue" in name else ("jobset", "v0.12.0")
                image = f"registry.k8s.io/{project}/{project}:{version}"
                return SimpleNamespace(spec=SimpleNamespace(template=SimpleNamespace(spec=SimpleNamespace(
                    containers=[SimpleNamespace(image=image)]))))

        class CoreV1:
            def __init__(self, api):
                pass

            def read_namespaced_config_map(self, name, namespace, _request_timeout):
                this.asked.append(("configmap", namespace, name))
                raise ApiException(status=config_map_status, reason={403: "Forbidden"}.get(config_map_status,
                                                                                            "Not Found"))

        monkeypatch.setattr(preflight.k8s_client, "AppsV1Api", AppsV1)
        monkeypatch.setattr(preflight.k8s_client, "CoreV1Api", CoreV1)


def test_the_installed_controllers_are_read_by_name_and_a_forbidden_config_map_is_not_checked(monkeypatch):
    """With `controllers: existing` the preview reads each Deployment and Kueue's manager ConfigMap by the name
    its chart gives it (what `make handoff` grants, `get` by name); a 403 on one says `not checked`, naming it."""
    from admission.shared_cluster import Installed  # pylint: disable=import-outside-toplevel

    cluster = _Controllers(monkeypatch, config_map_status=403, kueue_version="v0.12.0")
    found = {"jobset": Installed("jobset", "jobset-validating", ("jobset-system", "jobset"),
                                 install=ControllerInstall("jobset-system", "jobset")),
             "kueue": Installed("kueue", "kueue-validating", ("kueue-system", "kueue"),
                                install=ControllerInstall("kueue-system", "kueue"))}
    not_checked: list[str] = []
    problems = preflight.installed_problems(_existing_queued_config(), k8s_client.ApiClient(), found,
                                            {"kubernetes.io/metadata.name": "ml-team"}, not_checked)
    assert cluster.asked == [("deployment", "jobset-system", "jobset-controller"),
                             ("deployment", "kueue-system", "kueue-controller-manager"),
                             ("configmap", "kueue-system", "kueue-manager-config")]
    [kueue_version] = problems  # JobSet's image is v0.12.0; the stand-in's Kueue image v0.12.0 too, not v0.19
    assert "kueue" in str(kueue_version) and "v0.12.0" in str(kueue_version), kueue_version
    assert not_checked == ["not checked: Kueue's configuration (ConfigMap kueue-system/kueue-manager-config) "
                           "(403 Forbidden: the stack's credentials may not read it); the cluster itself refuses "
                           "what it must"]


JOBSET_MANIFESTS_WEBHOOKS = {  # as `kubectl apply -f` of JobSet v0.12.0's release manifests registers them
    "metadata": {"name": "jobset-validating-webhook-configuration",
                 "labels": {"app.kubernetes.io/instance": "jobset", "app.kubernetes.io/managed-by": "kustomize"}},
    "webhooks": [{"name": "vjobset.kb.io", "rules": [{"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"]}],
                  "clientConfig": {"service": {"name": "jobset-webhook-service", "namespace": "batch-system"}}}]}


def _webhooks(monkeypatch, *configurations):
    class Registration:
        def __init__(self, api):
            pass

        def list_validating_webhook_configuration(self, _request_timeout):
            return SimpleNamespace(items=list(configurations))

        def list_mutating_webhook_configuration(self, _request_timeout):
            return SimpleNamespace(items=[])

    monkeypatch.setattr(preflight.k8s_client, "AdmissionregistrationV1Api", Registration)


def test_a_controller_installed_from_its_release_manifests_is_read_where_its_webhooks_service_runs(monkeypatch):
    """JobSet applied from its release manifests, moved to `batch-system`: its webhook configuration has no Helm
    release, its Service is in batch-system. The preview reads kustomize's `jobset-controller-manager` there,
    and refuses the key at its default (the handoff would grant `jobset-controller` in jobset-system), naming
    the value to set; with that value it passes, and reads the same."""
    _webhooks(monkeypatch, JOBSET_MANIFESTS_WEBHOOKS)
    found = preflight.read_controllers(k8s_client.ApiClient(), [], owners=False)
    assert found["jobset"].install == ControllerInstall("batch-system") and found["jobset"].release is None
    cluster = _Controllers(monkeypatch)
    cfg = _existing_queued_config()
    problems = preflight.installed_problems(cfg, k8s_client.ApiClient(), {"jobset": found["jobset"]}, {}, [])
    assert cluster.asked == [("deployment", "batch-system", "jobset-controller-manager")]
    [problem] = problems
    assert str(problem).startswith("existingCluster.controllerReleases.jobset: 'jobset-system/jobset' but jobset is "
                                   "installed from its release manifests in namespace 'batch-system'")
    assert problem.allowed == ("manifests:batch-system; then the platform team applies the RBAC of `make handoff "
                               "STACK=existing-dev` again, so that the deployer may read them")
    cluster.asked.clear()
    said = _existing_queued_config(controllerReleases={"jobset": "manifests:batch-system"})
    assert preflight.installed_problems(said, k8s_client.ApiClient(), {"jobset": found["jobset"]}, {}, []) == []
    assert cluster.asked == [("deployment", "batch-system", "jobset-controller-manager")]


def test_a_renamed_helm_release_is_read_under_its_chart_s_names_and_must_be_said(monkeypatch):
    """Kueue as Helm release `queues` in `platform`: its Deployment and ConfigMap are read under the chart's
    names for that release; the key must say `platform/queues` for the handoff to grant them."""
    kueue = {"metadata": {"name": "queues-kueue-validating-webhook-configuration",
                          "annotations": {"meta.helm.sh/release-name": "queues",
                                          "meta.helm.sh/release-namespace": "platform"}},
             "webhooks": [{"name": "vclusterqueue.kb.io", "rules": [{"apiGroups": ["kueue.x-k8s.io"]}],
                           "clientConfig": {"service": {"name": "queues-kueue-webhook-service",
                                                        "namespace": "platform"}}}]}
    _webhooks(monkeypatch, kueue)
    found = preflight.read_controllers(k8s_client.ApiClient(), [], owners=False)
    cluster = _Controllers(monkeypatch)
    said = _existing_queued_config(controllerReleases={"kueue": "platform/queues"})
    not_checked: list[str] = []
    assert preflight.installed_problems(said, k8s_client.ApiClient(), found, {}, not_checked) == []
    assert cluster.asked == [("deployment", "platform", "queues-kueue-controller-manager"),
                             ("configmap", "platform", "queues-kueue-manager-config")]
    [problem] = preflight.installed_problems(_existing_queued_config(), k8s_client.ApiClient(), found, {}, [])
    assert problem.key == "existingCluster.controllerReleases.kueue" and problem.allowed.startswith("platform/queues;")
