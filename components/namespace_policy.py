"""An existing cluster's namespace read before the stack declares anything in it: its Pod Security level, its
ResourceQuotas and LimitRanges.

The reads are GETs and LISTs in the stack's namespace only (a namespace's
owner may read them; components/preflight.py reads the cluster's
controllers); the judgement is admission/namespace_needs.py's and
admission/quota.py's. Each runs in `pulumi preview` and `pulumi up`, so a pull
request's preview shows a namespace that would refuse the stack's pods before
`up` creates a JobSet whose pods never start. A read the stack's credentials
may not make (403) is said as "not checked: <why>", and left to the cluster.
Under the SDK's mocks (the offline plan, the tests) nothing is read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pulumi
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.settings import get_monitor

from admission import quota
from admission.namespace_needs import level_needs, pod_security_problems, stack_pod_sets
from stack.config import StackConfig
from stack.problems import ConfigError, Problem

# Seconds to connect and to read each answer: a preview should not hang on a cluster that doesn't answer.
TIMEOUT = (5, 15)


@dataclass
class NamespaceFacts:
    """What the cluster says of the stack's namespace; None where it could not be read (`not_checked` says why)."""

    labels: dict | None = None  # None: no such namespace
    quotas: list[dict] | None = None
    limit_ranges: list[dict] | None = None
    not_checked: list[str] = field(default_factory=list)


def _read(facts: NamespaceFacts, what: str, read: Callable):
    try:
        return read()
    except ApiException as err:
        if err.status == 404:
            return None
        facts.not_checked.append(f"not checked: the namespace's {what} ({err.status} {err.reason}: the stack's "
                                 "credentials may not read them); the cluster refuses what they forbid")
        return None


def read_namespace(api: k8s_client.ApiClient, namespace: str) -> NamespaceFacts:
    core, facts = k8s_client.CoreV1Api(api), NamespaceFacts()

    def listed(items) -> list[dict]:
        return [api.sanitize_for_serialization(item) for item in items]

    found = _read(facts, "labels", lambda: core.read_namespace(namespace, _request_timeout=TIMEOUT))
    facts.labels = (found.metadata.labels or {}) if found is not None else None
    if facts.labels is None:
        return facts  # no namespace: the controllers' check says so (admission/shared_cluster.py)
    facts.quotas = _read(facts, "ResourceQuotas", lambda: listed(
        core.list_namespaced_resource_quota(namespace, _request_timeout=TIMEOUT).items))
    facts.limit_ranges = _read(facts, "LimitRanges", lambda: listed(
        core.list_namespaced_limit_range(namespace, _request_timeout=TIMEOUT).items))
    return facts


def namespace_problems(cfg: StackConfig, facts: NamespaceFacts) -> tuple[list[Problem], list[str]]:
    """(problems, warnings) of the stack's pods in its namespace as the cluster has it."""
    namespace, sets = cfg.runs_namespace, stack_pod_sets(cfg)
    problems, warnings = [], list(facts.not_checked)
    if facts.labels is not None and not cfg.creates_namespace:  # a namespace the stack declares, it labels
        problems += pod_security_problems(namespace, facts.labels, level_needs(sets))
    if facts.quotas:
        problems += quota.quota_problems(namespace, facts.quotas, sets)
    if facts.limit_ranges:
        problems += quota.limit_range_problems(namespace, facts.limit_ranges, sets)
    return problems, warnings


def check(cfg: StackConfig, api: k8s_client.ApiClient) -> None:
    """Raise ConfigError on what the namespace would refuse; say what was not checked."""
    problems, warnings = namespace_problems(cfg, read_namespace(api, cfg.runs_namespace))
    for line in warnings:
        pulumi.log.warn(line)
    if problems:
        raise ConfigError(problems)


def _under_mocks() -> bool:
    return isinstance(get_monitor(), MockMonitor)


def check_context(cfg: StackConfig, context: str, kubeconfig: str | None) -> None:
    """The check against a kubeconfig context (an existing cluster's `context`), before anything is declared."""
    if _under_mocks():
        return
    try:
        api = k8s_config.new_client_from_config(config_file=kubeconfig, context=context)
    except Exception as err:  # noqa: BLE001 (no such context or file: the provider says so on its own terms)
        pulumi.log.warn(f"not checked: the namespace's Pod Security level and quotas (kubeconfig context "
                        f"{context!r}: {err})")
        return
    check(cfg, api)


def checked_kubeconfig(cfg: StackConfig, kubeconfig: pulumi.Output[str]) -> pulumi.Output[str]:
    """The kubeconfig, once the namespace's check against it has passed (an existing cluster named by `name`
    and `location`): the provider built from it, and so every in-cluster object, waits for the check."""
    import yaml  # noqa: PLC0415 (only this variant parses a kubeconfig)

    def checked(text: str) -> str:
        if not _under_mocks():
            check(cfg, k8s_config.new_client_from_config_dict(yaml.safe_load(text)))
        return text
    return kubeconfig.apply(checked)
