"""The deploy identity's roles, derived: every Google API request the stacks make has its permission and
role in one table (admission/google_api/permissions.py), and docs/ci.md grants exactly those roles."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from admission.google_api import discovery, permissions
from admission.google_api.judge import MAPPINGS
from admission.google_api.rules import ResourceMapping
from tests.admission.test_google_api_stacks import declared, every_declaration

ROOT = Path(__file__).resolve().parents[2]
P = "gke-finetune:"
# Images built in Cloud Build: `gcloud builds submit` through the command provider.
CLOUD_BUILD = ("dev", {f"{P}imageBuilder": "cloudbuild"})


@pytest.fixture(scope="module")
def every_request() -> list[str]:
    resources = every_declaration()
    from tests.support.pulumi_harness import run_stack

    stack, overrides = CLOUD_BUILD
    resources += [(r.type, r.name, r.inputs) for r in run_stack(stack, overrides=overrides).resources]
    return permissions.requests(resources)


def test_every_request_the_stacks_make_has_a_permission_and_a_role(every_request):
    assert permissions.uncovered(every_request) == []
    assert set(permissions.CLOUD_BUILD) <= set(every_request), "the Cloud Build variant builds in Cloud Build"


def test_a_request_without_a_row_fails(monkeypatch):
    new = ResourceMapping("gcp:container/cluster:Cluster", "container.v1beta1",
                          "container.projects.locations.clusters.setResourceLabels", {}, {}, "")
    monkeypatch.setitem(MAPPINGS, "gcp:container/cluster:Cluster", new)
    methods = permissions.requests([("gcp:container/cluster:Cluster", "c", {})])
    assert permissions.uncovered(methods) == ["container.projects.locations.clusters.setResourceLabels"]
    monkeypatch.setitem(MAPPINGS, "gcp:compute/address:Address",
                        ResourceMapping("gcp:compute/address:Address", "compute.beta", "compute.addresses.insert",
                                        {}, {}, ""))
    methods = permissions.requests([("gcp:compute/address:Address", "a", {})])
    assert permissions.uncovered(methods) == ["compute.addresses.insert", "gcp:compute/address:Address: no lifecycle row"]


def test_every_row_names_a_method_google_defines_and_a_permission_of_its_service():
    for call in permissions.CALLS:
        if call.api:
            discovery.method(call.api, call.method)  # raises for a method the document lacks
        for need in call.needs:
            assert re.fullmatch(r"[a-z]+\.[a-zA-Z]+\.[a-zA-Z]+", need.permission), need
            assert re.fullmatch(r"roles/[a-z]+\.[a-zA-Z.]+", need.role), need
        assert permissions.reference(call).startswith("https://cloud.google.com/"), call


def test_every_invoke_the_components_call_has_a_row():
    """Each `gcp.<module>.get_<x>` call in components/, as its Pulumi token, is in INVOKES."""
    found = set()
    for path in (ROOT / "components").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and \
                    isinstance(node.value.value, ast.Name) and node.value.value.id == "gcp" and \
                    node.attr.startswith("get_"):
                name = node.attr.removesuffix("_output").removeprefix("get_")
                camel = "".join(part.title() for part in name.split("_"))
                found.add(f"gcp:{node.value.attr}/get{camel}:get{camel}")
    assert found and found <= set(permissions.INVOKES), found - set(permissions.INVOKES)
    assert set(permissions.INVOKES.values()) <= set(permissions.BY_METHOD)


def test_the_compute_objects_need_network_and_security_admin():
    methods = permissions.requests(declared("dev"))
    granted = {role for role, _ in permissions.roles(methods)}
    assert {"roles/compute.networkAdmin", "roles/compute.securityAdmin"} <= granted
    assert permissions.roles(["compute.firewalls.insert"]) == {
        ("roles/compute.securityAdmin", permissions.PROJECT): ["compute.firewalls.create",
                                                               "compute.networks.updatePolicy"]}


# --- docs/ci.md ---------------------------------------------------------------------------------


def _ci() -> str:
    return (ROOT / "docs" / "ci.md").read_text()


def test_the_ci_docs_show_the_table(every_request):
    assert permissions.markdown(every_request) in _ci(), (
        "docs/ci.md's table is not the table of admission/google_api/permissions.py; paste:\n"
        + permissions.markdown(every_request))


def test_the_setup_grants_the_deploy_identity_exactly_the_derived_roles(every_request):
    from tests.tools.test_workflow_identities import _granted, _setup_commands

    derived = {role for role, _ in permissions.roles(every_request)}
    granted = _granted(_setup_commands(), "pulumi-deploy") - {"roles/iam.workloadIdentityUser"}
    assert granted == derived, (sorted(granted - derived), sorted(derived - granted))
