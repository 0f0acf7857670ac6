"""The ladder controller's Role under RBAC's escalation check, on the real API server.

A user may create a Role, and bind it, only if the user holds every right it grants
(https://kubernetes.io/docs/reference/access-authn-authz/rbac/#privilege-escalation-prevention-and-bootstrapping).
An existing-cluster stack with a ladder declares the controller's Role and RoleBinding (manifests/ladder.py), so
`make handoff` grants its deployer those rights (tools/plan/rbac.py). Here a deployer with exactly the handoff's
Role creates the controller's Role and RoleBinding; one whose Role lacks what the controller's grants is refused.
"""

from __future__ import annotations

import dataclasses

import pytest

from e2e.harness.kube import ApiError
from e2e.harness.session import control_plane
from e2e.harness.tools import ROOT
from e2e.tests.settings import LIFETIME
from tests.support.ladder_stack import STACK, ladder_overrides
from tools import offline
from tools.plan import rbac

TOOLS = ("etcd", "kubernetes", "kwok")
NAMESPACE = "ml-team"  # Pulumi.existing-dev.yaml's


def _ladder_stack() -> list[dict]:
    """The existing-dev stack's run on a ladder (tests/support/ladder_stack.py), as the program declares it."""
    deployment = offline.run_stack(STACK, overrides=ladder_overrides(ROOT))
    return [{"type": r.type, "name": r.name, "inputs": r.inputs} for r in deployment.resources]


def _grant(kube, found: rbac.Rights, user: str) -> None:
    subjects = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]
    for doc in rbac.rbac_documents(found, user, subjects):
        kube.apply(doc)


@pytest.fixture(scope="module")
def plane(state_root):
    with control_plane(state_root / "ladder-rbac", LIFETIME, tool_names=TOOLS) as cp:
        kube = cp.client()
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        yield cp, kube


def test_the_handoff_deployer_creates_the_ladder_controller_s_role_and_binding(plane):
    cp, kube = plane
    resources = _ladder_stack()
    objects, releases = rbac.declared(resources)
    found = rbac.rights(objects, NAMESPACE, releases)
    ladder = [r["inputs"] for r in resources if r["inputs"].get("kind") in ("Role", "RoleBinding")]
    assert {m["kind"] for m in ladder} == {"Role", "RoleBinding"}, "the stack declares the controller's Role"

    _grant(kube, found, "deployer")
    as_deployer = cp.client()
    as_deployer.impersonate = "deployer"
    for manifest in sorted(ladder, key=lambda m: m["kind"] != "Role"):  # the Role first, as the program declares
        as_deployer.create(manifest)
    assert kube.get("rbac.authorization.k8s.io/v1", "Role", ladder[0]["metadata"]["name"], NAMESPACE)

    # Without the rights the controller's Role grants, the same deployer is refused: the check is real.
    bare = dataclasses.replace(found, namespaced=tuple(r for r in found.namespaced if not r.why.startswith("granted by")))
    assert len(bare.namespaced) < len(found.namespaced)
    _grant(kube, bare, "bare-deployer")
    as_bare = cp.client()
    as_bare.impersonate = "bare-deployer"
    role = next(m for m in ladder if m["kind"] == "Role")
    other = {**role, "metadata": {**role["metadata"], "name": "ladder-again"}}
    with pytest.raises(ApiError) as refused:
        as_bare.create(other)
    assert refused.value.status == 403 and "not currently held" in refused.value.message, refused.value
