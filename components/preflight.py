"""An existing cluster read before the stack declares anything in it: its controllers and the stack's namespace.

The reads (Kubernetes API, as the stack's own credentials allow) are here; the
judgement is admission/shared_cluster.py's. They run in `pulumi preview` and
`pulumi up` alike, so a pull request's preview shows the refusal. Under the
SDK's mocks (the offline plan and the tests) there is no cluster to read, and
nothing is read.

A read-only identity can run it: it reads webhook configurations, the
controllers' Deployments (by name, with `controllers: existing`), Kueue's
manager ConfigMap (by name) and the stack's namespace, never a Secret (a Helm
release's values live in one). A read that is forbidden (403) is said as
"not checked: <why>" and left to the cluster (the provider's create refuses an
object that exists; Helm refuses to install over a release or objects it does
not own). A cluster that doesn't answer stops the preview, naming the server
and the context: an unchecked cluster is not a checked one. Each request has a
short connect and read timeout and is not retried (the client's urllib3 pool
otherwise retries a failed connection 3 times: kubernetes-client/python
kubernetes/client/rest.py, `configuration.retries`).
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.settings import get_monitor

from admission.shared_cluster import (
    ControllerObjects, Installed, controller_objects, controller_problems, deployment_owner, install_of,
    installed_controllers, namespace_problems, release_of, release_problems,
)
from admission.installed_controllers import CONFIG_KEY, kueue_config_problems, version_problems
from admission.shared_pools import overcommit_problems
from manifests.kueue import API_GROUP, API_VERSION, cluster_queue_name
from stack.config import StackConfig
from stack.queueing import queued_runs
from stack.problems import ConfigError, Problem
from stack.reader import refused

# Seconds to connect and to read each answer: a preview should not hang on a cluster that doesn't answer.
TIMEOUT = (5, 15)


def under_mocks() -> bool:
    """The program runs under the SDK's mocks (tools/offline.py, the tests): no cluster exists."""
    return isinstance(get_monitor(), MockMonitor)


def needed_controllers(cfg: StackConfig) -> tuple[str, ...]:
    """The controllers the stack's runs need: JobSet always, Kueue where a run goes through it."""
    return ("jobset", "kueue") if cfg.kueue_flavors() else ("jobset",)


def api_client(load, *args, **kwargs) -> k8s_client.ApiClient:
    """A client from a kubeconfig loader (`load_kube_config`, `load_kube_config_from_dict`) that tries each
    request once."""
    configuration = k8s_client.Configuration()
    load(*args, client_configuration=configuration, persist_config=False, **kwargs)
    configuration.retries = False
    return k8s_client.ApiClient(configuration)


def reach(api: k8s_client.ApiClient, where: str) -> None:
    """Stop unless the cluster's API server answers (its /version)."""
    try:
        k8s_client.VersionApi(api).get_code(_request_timeout=TIMEOUT)
    except ApiException:
        return  # it answered (even a 401 or 403 is an answer; the reads below say what they may not read)
    except Exception as err:  # noqa: BLE001 (refused, timed out, no route, TLS: the cluster is not reachable)
        raise ConfigError([Problem("existingCluster", where, f"did not answer at {api.configuration.host} "
                                   f"({type(err).__name__}): the stack can't check the cluster it would deploy "
                                   "into, and stops before declaring anything",
                                   "a cluster this machine reaches (the context, the endpoint, a VPN or the "
                                   "control plane's authorized networks)")]) from None


def _owner(api: k8s_client.ApiClient, release: tuple[str, str], not_checked: list[str]) -> Mapping | None:
    """Who installed a controller: its Deployment's `gke-finetune/owner` (admission/shared_cluster.py)."""
    namespace, name = release
    try:
        listed = k8s_client.AppsV1Api(api).list_namespaced_deployment(namespace, _request_timeout=TIMEOUT)
    except ApiException as err:
        not_checked.append(f"not checked: who installed Helm release {name!r} ({err.status} {err.reason} on the "
                           f"Deployments of namespace {namespace!r})")
        return None
    owners = [deployment_owner(api.sanitize_for_serialization(d)) for d in listed.items]
    return next((o for o in owners if o), None)


def read_controllers(api: k8s_client.ApiClient, not_checked: list[str] | None = None,
                     owners: bool = True) -> dict[str, Installed]:
    """The JobSet and Kueue installations the cluster's webhook configurations show, with their owners (where
    `owners`: only a stack that would install the controllers asks who did)."""
    not_checked = [] if not_checked is None else not_checked
    registration = k8s_client.AdmissionregistrationV1Api(api)
    configurations = [
        api.sanitize_for_serialization(c)
        for listed in (registration.list_validating_webhook_configuration(_request_timeout=TIMEOUT),
                       registration.list_mutating_webhook_configuration(_request_timeout=TIMEOUT))
        for c in listed.items
    ]
    found = {}
    for controller, configuration in installed_controllers(configurations).items():
        release = release_of(configuration)
        owner = _owner(api, release, not_checked) if release and owners else None
        found[controller] = Installed(controller, configuration["metadata"]["name"], release, owner,
                                      install_of(controller, configuration))
    return found


def read_namespace_labels(api: k8s_client.ApiClient, namespace: str) -> dict | None:
    try:
        return k8s_client.CoreV1Api(api).read_namespace(namespace, _request_timeout=TIMEOUT).metadata.labels or {}
    except ApiException as err:
        if err.status == 404:
            return None
        raise


def cluster_problems(cfg: StackConfig, api: k8s_client.ApiClient) -> tuple[list[Problem], list[str]]:
    """(problems, not checked) of the stack's namespace and controllers against the cluster behind `api`."""
    not_checked: list[str] = []
    labels: dict[str, str] = {}

    def namespace() -> list[Problem]:
        read = read_namespace_labels(api, cfg.runs_namespace)
        labels.update(read or {})
        return namespace_problems(cfg.runs_namespace, cfg.create_namespace, read, cfg.stack)

    install = cfg.existing.controllers == "install"
    found: dict[str, Installed] = {}

    def controllers() -> list[Problem]:
        found.update(read_controllers(api, not_checked, install))
        return controller_problems(cfg.existing.controllers, needed_controllers(cfg), found, cfg.runs_namespace)

    problems = _read("the stack's namespace", not_checked, namespace)
    problems += _read("the installed controllers", not_checked, controllers)
    if not install and found:
        problems += installed_problems(cfg, api, found, labels, not_checked)
    if cfg.kueue_flavors():
        problems += _read("the other ClusterQueues on the stack's pools (Kueue's ClusterQueues and ResourceFlavors)",
                          not_checked, lambda: shared_pool_problems(cfg, api))
    return problems, not_checked


def _kueue_objects(api: k8s_client.ApiClient, plural: str) -> list[dict]:
    """Every Kueue object of a cluster-scoped kind; none where Kueue's CRDs are not installed (404)."""
    try:
        listed = k8s_client.CustomObjectsApi(api).list_cluster_custom_object(
            API_GROUP, API_VERSION.partition("/")[2], plural, _request_timeout=TIMEOUT)
    except ApiException as err:
        if err.status == 404:
            return []
        raise
    return listed.get("items") or []


def shared_pool_problems(cfg: StackConfig, api: k8s_client.ApiClient) -> list[Problem]:
    """The stack's pools against the ClusterQueues already on the cluster (admission/shared_pools.py)."""
    keys = {p.name: f"pools[{i}]" for i, p in enumerate(cfg.pools)}
    return overcommit_problems(cfg.kueue_flavors(), keys, cluster_queue_name(cfg.runs_namespace),
                               _kueue_objects(api, "clusterqueues"), _kueue_objects(api, "resourceflavors"))


def installed_problems(cfg: StackConfig, api: k8s_client.ApiClient, found: Mapping[str, Installed],
                       labels: Mapping[str, str], not_checked: list[str]) -> list[Problem]:
    """The platform team's controllers (`controllers: existing`): their versions (Deployment images) and
    Kueue's configuration (its manager ConfigMap) against the stack's namespace and runs. Each object is read
    by its name, as the install the cluster shows names it (admission/shared_cluster.py `controller_objects`);
    `make handoff` grants exactly the names `existingCluster.controllerReleases` gives, and a key that names
    others is refused (`release_problems`)."""
    problems = []
    for controller in (c for c in needed_controllers(cfg) if c in found):
        said = cfg.existing.controller_releases.install(controller)
        install = found[controller].install or said
        problems += release_problems(controller, said, install, cfg.stack)
        objects = controller_objects(controller, install)
        where = f"Deployment {objects.namespace}/{objects.deployment}"
        images = _read(f"{controller}'s version ({where})", not_checked, lambda: [
            c.image for c in k8s_client.AppsV1Api(api).read_namespaced_deployment(
                objects.deployment, objects.namespace, _request_timeout=TIMEOUT).spec.template.spec.containers])
        problems += version_problems(controller, images)
        if objects.config_map:
            problems += _read(f"Kueue's configuration (ConfigMap {objects.namespace}/{objects.config_map})",
                              not_checked, lambda: _kueue_config_problems(cfg, api, objects, labels, not_checked))
    return problems


def _kueue_config_problems(cfg: StackConfig, api: k8s_client.ApiClient, objects: ControllerObjects,
                           labels: Mapping[str, str], not_checked: list[str]) -> list[Problem]:
    where = f"ConfigMap {objects.namespace}/{objects.config_map}"
    data = k8s_client.CoreV1Api(api).read_namespaced_config_map(
        objects.config_map, objects.namespace, _request_timeout=TIMEOUT).data or {}
    if CONFIG_KEY not in data:
        not_checked.append(f"not checked: Kueue's configuration ({where} holds no {CONFIG_KEY})")
        return []
    config = yaml.safe_load(data[CONFIG_KEY]) or {}
    queued = {r.name for r in queued_runs(cfg.runs, cfg.contracts())}
    return kueue_config_problems(config, cfg.runs_namespace, labels, [r.name for r in cfg.runs if r.name not in queued],
                                 where)


def _read(what: str, not_checked: list[str], judge) -> list[Problem]:
    try:
        return judge()
    except ApiException as err:  # e.g. 403: the stack's credentials may not read it
        why = "no object of that name" if err.status == 404 else "the stack's credentials may not read it"
        not_checked.append(f"not checked: {what} ({err.status} {err.reason}: {why}); the cluster itself refuses "
                           "what it must")
    return []


def check(cfg: StackConfig, api: k8s_client.ApiClient, where: str = "") -> None:
    """Raise ConfigError on the stack's problems with the cluster (or on a cluster that doesn't answer); say
    what could not be checked."""
    reach(api, where or api.configuration.host)
    problems, not_checked = cluster_problems(cfg, api)
    for line in not_checked:
        pulumi.log.warn(line)
    if problems:
        raise refused(ConfigError(problems))


def check_context(cfg: StackConfig, context: str, kubeconfig: str | None) -> None:
    """The check against a kubeconfig context (an existing cluster's `context`), before anything is declared."""
    if under_mocks():
        return
    try:
        api = api_client(k8s_config.load_kube_config, config_file=kubeconfig, context=context)
    except Exception as err:  # noqa: BLE001 (no such context or file)
        raise ConfigError([Problem("existingCluster.context", context, f"could not be loaded from the kubeconfig "
                                   f"({kubeconfig or '~/.kube/config'}): {err}",
                                   "a context of that kubeconfig (kubectl config get-contexts)")]) from None
    check(cfg, api, f"context {context!r}")


def checked_kubeconfig(cfg: StackConfig, kubeconfig: pulumi.Output[str]) -> pulumi.Output[str]:
    """The kubeconfig, once the check against it has passed: the provider built from it, and so every
    in-cluster object, waits for the check (an existing cluster named by `name` and `location`)."""
    def checked(text: str) -> str:
        if not under_mocks():
            check(cfg, api_client(k8s_config.load_kube_config_from_dict, yaml.safe_load(text)),
                  f"cluster {cfg.existing.name!r} in {cfg.existing.location}")
        return text
    return kubeconfig.apply(checked)
