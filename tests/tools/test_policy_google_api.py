"""The policy pack's Google API policy: the same requests and definitions, over the inputs the engine hands it.

The validation is called directly with the engine's argument shape (the
PolicyPack waits for an engine). At preview pulumi_policy hands the inputs
in proxies that raise `UnknownValueError` on reading a value not known yet
(pulumi_policy/proxy.py); `Guarded` below behaves the same way, and the
policy leaves such a value to the engine.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pytest

from policy import rules
from tests.support.pulumi_harness import EXISTING_CLUSTER_STACKS, SHIPPED_STACKS, run_stack

UNKNOWN_STRING = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


@dataclass
class Resource:
    resource_type: str
    props: dict
    urn: str
    name: str


@functools.cache
def declared(stack: str) -> tuple[Resource, ...]:
    return tuple(Resource(r.type, r.inputs, r.urn, r.name) for r in run_stack(stack).resources)


def violations(resources) -> list[str]:
    found: list[str] = []
    for resource in resources:
        rules.validate_google_api(resource, lambda message, urn=None: found.append(message))
    return found


@pytest.mark.parametrize("stack", [*SHIPPED_STACKS, *EXISTING_CLUSTER_STACKS])
def test_every_shipped_stack_passes_the_google_api_policy(stack):
    assert violations(declared(stack)) == []


def test_the_policy_reports_a_value_outside_googles_enum():
    resources = [copy.deepcopy(r) for r in declared("dev")]
    [firewall] = [r for r in resources if r.resource_type == "gcp:compute/firewall:Firewall"]
    firewall.props["direction"] = "INBOUND"
    [message] = violations(resources)
    assert message.startswith("webhooks (gcp:compute/firewall:Firewall) direction: 'INBOUND' is not a value Google "
                              "lists for Firewall.direction")
    assert message.endswith("; allowed: EGRESS, INGRESS")


class UnknownValueError(Exception):
    """pulumi_policy.proxy.UnknownValueError: what reading an unknown value raises."""


class Guarded(Mapping):
    """A mapping that raises on reading an unknown value, as pulumi_policy's _DictProxy does."""

    def __init__(self, target: dict):
        self._target = {k: _guard(v) for k, v in target.items()}

    def __getitem__(self, key):
        value = self._target[key]
        if value == UNKNOWN_STRING:
            raise UnknownValueError(key)
        return value

    def __iter__(self):
        return iter(self._target)

    def __len__(self):
        return len(self._target)


class GuardedList(Sequence):
    def __init__(self, target: list):
        self._target = [_guard(v) for v in target]

    def __getitem__(self, index):
        value = self._target[index]
        if value == UNKNOWN_STRING:
            raise UnknownValueError(index)
        return value

    def __len__(self):
        return len(self._target)


def _guard(value):
    if isinstance(value, dict):
        return Guarded(value)
    if isinstance(value, list):
        return GuardedList(value)
    return value


def test_values_unknown_at_preview_are_left_to_the_engine_and_the_rest_judged():
    [pool] = [r for r in declared("tpu-multihost") if r.name == "pool-v6e-2x4"]
    props = copy.deepcopy(pool.props)
    props["cluster"] = UNKNOWN_STRING  # the cluster's id, before the cluster exists
    props["nodeConfig"]["tags"] = [UNKNOWN_STRING]
    assert violations([Resource(pool.resource_type, Guarded(props), pool.urn, pool.name)]) == []
    props["placementPolicy"]["type"] = "COMPACTED"
    [message] = violations([Resource(pool.resource_type, Guarded(props), pool.urn, pool.name)])
    assert "placementPolicy.type: 'COMPACTED' is not a value Google lists" in message
