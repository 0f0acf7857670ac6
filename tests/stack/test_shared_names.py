"""Names that let stacks share a project and a cluster: the namespace, cluster-scoped objects, identities,
the default cluster and registry names."""

from __future__ import annotations

import pytest

from core.ids import CLUSTER_NAME_MAX, default_cluster_name, default_registry_id
from core.names import (cluster_scoped, compute_class_name, legacy_cluster_scoped, priority_class_name,
                        stager_service_account, trainer_service_account, WORKLOAD_PRIORITIES)
from core.syntax import DNS_1123_LABEL
from manifests.kueue import renamed_from
from stack.config import ConfigError, StackConfig

DIGEST = "us-docker.pkg.dev/p/r/gemma-jax@sha256:" + "a" * 64
OWN = {"project": "my-project-id", "region": "us-east5", "zones": ["us-east5-b"]}
EXISTING = {"project": "my-project-id", "region": "us-east5", "bucketName": "team-bucket",
            "existingCluster": {"context": "team"}, "images": {"gemma-jax": DIGEST}}


def problems(values: dict) -> list[str]:
    with pytest.raises(ConfigError) as err:
        StackConfig.from_mapping(values)
    return err.value.problems


def test_a_stack_that_owns_its_cluster_keeps_the_finetune_namespace_and_declares_it():
    cfg = StackConfig.from_mapping({**OWN, "stack": "dev"})
    assert cfg.runs_namespace == "finetune" and cfg.creates_namespace


def test_an_existing_clusters_stack_names_its_namespace_and_declares_it_only_when_asked():
    found = problems({**EXISTING, "stack": "a"})
    assert any(p.startswith("namespace: not set, and the stack uses an existing cluster") for p in found), found
    cfg = StackConfig.from_mapping({**EXISTING, "stack": "a", "namespace": "team-a"})
    assert cfg.runs_namespace == "team-a" and not cfg.creates_namespace
    assert StackConfig.from_mapping({**EXISTING, "stack": "a", "namespace": "team-a",
                                     "createNamespace": True}).creates_namespace


@pytest.mark.parametrize("namespace, why", [
    ("kube-system", "is a namespace of Kubernetes, GKE or the controllers"),
    ("kueue-system", "is a namespace of Kubernetes, GKE or the controllers"),
    ("gke-managed-system", "is a namespace of Kubernetes, GKE or the controllers"),
    ("default", "is a namespace of Kubernetes, GKE or the controllers"),
    ("Team_A", "is not a DNS-1123 label"),
    ("a" * 64, "has 64 characters; a DNS-1123 label has at most 63"),
])
def test_a_namespace_the_stack_may_not_use_is_refused(namespace, why):
    [found] = [p for p in problems({**OWN, "namespace": namespace}) if p.startswith("namespace:")]
    assert found.startswith(f"namespace: {namespace!r} {why}") and "allowed: a DNS-1123 label of your own" in found


def test_cluster_scoped_objects_carry_the_namespace_within_label_limits():
    assert cluster_scoped("team-a") == "team-a"
    assert cluster_scoped("team-a", "v6e-2x4") == "team-a-v6e-2x4-b07bbf"
    long = compute_class_name("n" * 60, "a-long-run-name")
    assert len(long) == 63 and long != compute_class_name("n" * 60, "another-long-run")
    assert DNS_1123_LABEL.match(long), long


@pytest.mark.parametrize("one, other", [
    (("ml", "spot-v6e-2x4"), ("ml-spot", "v6e-2x4")),
    (("a", "ladder-b-ladder-c"), ("a-ladder-b", "ladder-c")),
    (("n" * 58, "x-v6e"), ("n" * 58 + "-x", "v6e")),  # both cut to 63 characters
])
def test_two_namespaces_and_names_never_give_one_cluster_scoped_name(one, other):
    assert legacy_cluster_scoped(*one) == legacy_cluster_scoped(*other) or len(one[0]) > 50  # the old ambiguity
    assert cluster_scoped(*one) != cluster_scoped(*other)
    assert all(DNS_1123_LABEL.match(cluster_scoped(*n)) and len(cluster_scoped(*n)) <= 63 for n in (one, other))


def test_priority_classes_keep_their_names_which_a_priority_makes_unambiguous():
    """`<namespace>-<priority>`: no priority holds a hyphen, so the name's last hyphen ends the namespace."""
    assert all("-" not in p for p in WORKLOAD_PRIORITIES)
    assert priority_class_name("ml", "high") == "ml-high"
    names = {priority_class_name(ns, p) for ns in ("ml", "ml-high", "ml-low") for p in WORKLOAD_PRIORITIES}
    assert len(names) == 3 * len(WORKLOAD_PRIORITIES)


def test_renamed_kueue_objects_are_aliased_to_their_former_names():
    cfg = StackConfig.from_mapping({**EXISTING, "stack": "a", "namespace": "team-a", "pools": [
        {"name": "q", "accelerator": "tpu-v6e", "topology": "1x1", "capacity": "queued", "nodePool": "q"}],
        "runs": [{"name": "r", "trainer": "gemma-jax", "pool": "q", "data": "d"}],
        "datasets": [{"name": "d", "url": "https://example.com/d.txt"}]})
    assert renamed_from(cfg.kueue_flavors()) == {
        "resourceflavor-team-a-q-44caf4": "resourceflavor-team-a-q",
        "provisioningrequestconfig-team-a-q-provisioning-b24acf": "provisioningrequestconfig-team-a-q-provisioning",
        "admissioncheck-team-a-q-provisioning-b24acf": "admissioncheck-team-a-q-provisioning",
    }


def test_each_stack_has_its_own_service_accounts_and_default_names():
    assert (trainer_service_account("dev"), stager_service_account("dev")) == ("dev-trainer", "dev-stager")
    assert trainer_service_account("dev") != trainer_service_account("a4")
    a, b = StackConfig.from_mapping({**OWN, "stack": "dev"}), StackConfig.from_mapping({**OWN, "stack": "a4"})
    assert (a.gke_cluster_name, a.registry_id) == ("finetune-dev", "finetune-dev")
    assert a.gke_cluster_name != b.gke_cluster_name and a.registry_id != b.registry_id
    named = StackConfig.from_mapping({**OWN, "stack": "dev", "clusterName": "ours", "registryName": "images"})
    assert (named.gke_cluster_name, named.registry_id) == ("ours", "images")


def test_a_long_stack_names_a_cluster_within_gkes_limit():
    stack = "team.research_" + "x" * 60
    name = default_cluster_name(stack)
    assert len(name) <= CLUSTER_NAME_MAX and name.startswith("finetune-team-research-")
    assert name != default_cluster_name(stack + "2")
    assert len(default_registry_id(stack)) <= 63
