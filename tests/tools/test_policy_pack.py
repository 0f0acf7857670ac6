"""The CrossGuard policy pack: the admission rules over the resources a stack declares.

The pack's validations are called directly with the engine's argument shapes
(the PolicyPack itself is never instantiated: it waits for the engine).
"""

from __future__ import annotations

import ast
import copy
import functools
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from policy import rules
from tests.support.pulumi_harness import EXISTING_CLUSTER_STACKS, SHIPPED_STACKS, run_stack

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Resource:
    """What the engine hands a validation: ResourceValidationArgs / PolicyResource."""

    resource_type: str
    props: dict
    urn: str
    name: str


@dataclass
class Stack:
    resources: list[Resource]


@functools.cache
def declared(stack: str) -> tuple[Resource, ...]:
    return tuple(Resource(r.type, r.inputs, r.urn, r.name) for r in run_stack(stack).resources)


def violations(stack_resources) -> list[str]:
    found: list[str] = []

    def report(message, urn=None):
        found.append(message)

    for resource in stack_resources:
        if resource.resource_type == rules.JOBSET:
            rules.validate_jobset_syntax(resource, report)
        if resource.resource_type == rules.NODE_POOL:
            rules.validate_node_pool(resource, report)
    rules.validate_runs_fit(Stack(list(stack_resources)), report)
    return found


def changed(stack: str, type_token: str, change) -> list[Resource]:
    resources = [copy.deepcopy(r) for r in declared(stack)]
    for r in resources:
        if r.resource_type == type_token and r.name != "cluster-system":
            change(r.props)
    return resources


def pod(props):
    return props["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]


@pytest.mark.parametrize("stack", [*SHIPPED_STACKS, *EXISTING_CLUSTER_STACKS])
def test_every_shipped_stack_passes_the_pack(stack):
    assert violations(declared(stack)) == []


def test_fit_fires_on_a_small_boot_disk():
    resources = changed("dev", rules.NODE_POOL, lambda p: p["nodeConfig"].update(diskSizeGb=30))
    [message] = violations(resources)
    assert message.startswith("runs-gemma3-single-host: fit: ") and "ephemeral-storage" in message


def test_fit_fires_on_an_oversized_request():
    resources = changed("a4", rules.JOBSET,
                        lambda p: pod(p)["spec"]["containers"][0]["resources"]["requests"].update(memory="4000Gi"))
    [message] = violations(resources)
    assert "memory" in message and "3819.6Gi allocatable less the 38.2Gi margin" in message


def test_autopilot_rules_fire_on_host_network():
    resources = changed("autopilot", rules.JOBSET, lambda p: pod(p)["spec"].update(hostNetwork=True))
    [message] = violations(resources)
    assert "autopilot" in message and "hostNetwork" in message


def test_syntax_fires_on_a_path_in_a_selector():
    resources = changed("a4", rules.JOBSET, lambda p: pod(p)["spec"]["nodeSelector"].update(
        {"cloud.google.com/reservation-name": "projects/p/reservations/r"}))
    [message] = violations(resources)
    assert message.startswith("syntax: ") and "no '/'" in message


def test_node_pool_rules_fire_on_total_bounds_for_a_slice():
    resources = changed("tpu-multihost", rules.NODE_POOL, lambda p: p.update(
        autoscaling={"totalMinNodeCount": 0, "totalMaxNodeCount": 2, "locationPolicy": "ANY"}))
    [message] = violations(resources)
    assert "total node counts" in message


def test_unknown_values_at_preview_are_skipped():
    resource = Resource(rules.JOBSET, {"metadata": {"name": "r"}, "spec": None}, "urn", "r")
    assert violations([resource]) == []


def test_the_pack_runs_without_pydantic_or_the_pulumi_program():
    code = ("import sys; import policy.rules; "
            "print(sorted(m for m in ('pydantic', 'pulumi', 'stack', 'manifests') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_pack_registers_every_validation():
    tree = ast.parse((ROOT / "policy" / "__main__.py").read_text())
    registered = {n.attr for n in ast.walk(tree)
                  if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "rules"}
    assert registered == {name for name in dir(rules) if name.startswith("validate_")}
    assert (ROOT / "policy" / "PulumiPolicy.yaml").read_text().count("python") == 1
