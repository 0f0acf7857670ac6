"""An existing cluster read before the stack declares anything in it: its controllers and the stack's namespace.

The reads (Kubernetes API, as the stack's own credentials allow) are here; the
judgement is admission/shared_cluster.py's. They run in `pulumi preview` and
`pulumi up` alike, so a pull request's preview shows the refusal. Under the
SDK's mocks (the offline plan and the tests) there is no cluster to read, and
nothing is read.

What can't be read is not judged: a user allowed into their namespace only may
not list webhook configurations (403), and then the stack leaves the judgement
to the cluster (the provider's create refuses an object that exists; Helm
refuses to install over a release or objects it does not own) and says so.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Mapping

import pulumi
import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.settings import get_monitor

from admission.shared_cluster import (
    OWNER_KEY, Installed, controller_problems, installed_controllers, namespace_problems, release_of,
)
from stack.config import StackConfig
from stack.problems import ConfigError, Problem
from stack.reader import refused

_TIMEOUT = 20  # seconds per request: a preview should not hang on an unreachable cluster


def under_mocks() -> bool:
    """The program runs under the SDK's mocks (tools/offline.py, the tests): no cluster exists."""
    return isinstance(get_monitor(), MockMonitor)


def needed_controllers(cfg: StackConfig) -> tuple[str, ...]:
    """The controllers the stack's runs need: JobSet always, Kueue where a run goes through it."""
    return ("jobset", "kueue") if cfg.kueue_flavors() else ("jobset",)


def _release_owner(api: k8s_client.ApiClient, release: tuple[str, str]) -> Mapping | None:
    """The `gkeFinetune` values of a deployed Helm release (Helm 3 keeps a release in a Secret whose
    `release` field is base64 of gzipped JSON; its `config` is the user-supplied values)."""
    namespace, name = release
    secrets = k8s_client.CoreV1Api(api).list_namespaced_secret(
        namespace, label_selector=f"owner=helm,name={name},status=deployed", _request_timeout=_TIMEOUT)
    for secret in secrets.items:
        payload = base64.b64decode(base64.b64decode(secret.data["release"]))
        values = json.loads(gzip.decompress(payload) if payload[:2] == b"\x1f\x8b" else payload).get("config") or {}
        return values.get(OWNER_KEY)
    return None


def read_controllers(api: k8s_client.ApiClient) -> dict[str, Installed]:
    """The JobSet and Kueue installations the cluster's webhook configurations show, with their owners."""
    registration = k8s_client.AdmissionregistrationV1Api(api)
    configurations = [
        api.sanitize_for_serialization(c)
        for listed in (registration.list_validating_webhook_configuration(_request_timeout=_TIMEOUT),
                       registration.list_mutating_webhook_configuration(_request_timeout=_TIMEOUT))
        for c in listed.items
    ]
    found = {}
    for controller, configuration in installed_controllers(configurations).items():
        release = release_of(configuration)
        owner = _release_owner(api, release) if release else None
        found[controller] = Installed(controller, configuration["metadata"]["name"], release, owner)
    return found


def read_namespace_labels(api: k8s_client.ApiClient, namespace: str) -> dict | None:
    try:
        return k8s_client.CoreV1Api(api).read_namespace(namespace, _request_timeout=_TIMEOUT).metadata.labels or {}
    except ApiException as err:
        if err.status == 404:
            return None
        raise


def cluster_problems(cfg: StackConfig, api: k8s_client.ApiClient) -> list[Problem]:
    """The stack's namespace and controllers against the cluster behind `api`; a part that can't be read is
    left to the cluster, with a warning."""
    namespace = _read("the stack's namespace", lambda: namespace_problems(
        cfg.runs_namespace, cfg.create_namespace, read_namespace_labels(api, cfg.runs_namespace), cfg.stack))
    controllers = _read("the installed controllers", lambda: controller_problems(
        cfg.existing.controllers, needed_controllers(cfg), read_controllers(api), cfg.runs_namespace))
    return namespace + controllers


def _read(what: str, judge) -> list[Problem]:
    try:
        return judge()
    except ApiException as err:  # e.g. 403: the stack's credentials may not read it
        pulumi.log.warn(f"could not read {what} in the cluster ({err.status} {err.reason}): not checked before "
                        "the stack's objects are applied; the cluster itself refuses what it must")
    except Exception as err:  # unreachable: the provider reports it on its own terms
        pulumi.log.warn(f"could not reach the cluster to check {what}: {err}")
    return []


def check(cfg: StackConfig, api: k8s_client.ApiClient) -> None:
    """Raise ConfigError on the stack's problems with the cluster."""
    problems = cluster_problems(cfg, api)
    if problems:
        raise refused(ConfigError(problems))


def check_context(cfg: StackConfig, context: str, kubeconfig: str | None) -> None:
    """The check against a kubeconfig context (an existing cluster's `context`), before anything is declared."""
    if under_mocks():
        return
    try:
        api = k8s_config.new_client_from_config(config_file=kubeconfig, context=context)
    except Exception as err:  # no such context or file: the provider says so on its own terms
        pulumi.log.warn(f"could not load kubeconfig context {context!r} to check the cluster: {err}")
        return
    check(cfg, api)


def checked_kubeconfig(cfg: StackConfig, kubeconfig: pulumi.Output[str]) -> pulumi.Output[str]:
    """The kubeconfig, once the check against it has passed: the provider built from it, and so every
    in-cluster object, waits for the check (an existing cluster named by `name` and `location`)."""
    def checked(text: str) -> str:
        if not under_mocks():
            check(cfg, k8s_config.new_client_from_config_dict(yaml.safe_load(text)))
        return text
    return kubeconfig.apply(checked)
