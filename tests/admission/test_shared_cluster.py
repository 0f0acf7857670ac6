"""A shared cluster's singletons and namespaces, judged before a stack declares anything there."""

from __future__ import annotations

import pytest

from admission.shared_cluster import (
    ControllerObjects, Installed, controller_objects, controller_of, controller_problems, installed_controllers, namespace_problems, owner_values, release_of,
    deployment_owner,
)

JOBSET_WEBHOOK = {"name": "validate-jobset-x-k8s-io-v1alpha2-jobset.x-k8s.io",
                  "rules": [{"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"]}]}
KUEUE_WEBHOOKS = [
    {"name": "vjobset.kb.io", "rules": [{"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"]}]},
    {"name": "vclusterqueue.kb.io", "rules": [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues"]}]},
]


def configuration(name, webhooks, release=None):
    meta = {"name": name}
    if release:
        meta["annotations"] = {"meta.helm.sh/release-namespace": release[0], "meta.helm.sh/release-name": release[1]}
    return {"metadata": meta, "webhooks": webhooks}


def test_kueues_own_jobset_webhook_is_not_taken_for_jobset():
    """Kueue's JobSet integration registers a webhook on JobSets too; its configuration is Kueue's."""
    assert controller_of(configuration("kueue-validating", KUEUE_WEBHOOKS)) == "kueue"
    assert controller_of(configuration("jobset-validating", [JOBSET_WEBHOOK])) == "jobset"
    assert controller_of(configuration("other", [{"rules": [{"apiGroups": ["apps"]}]}])) is None
    found = installed_controllers([configuration("kueue-validating", KUEUE_WEBHOOKS)])
    assert set(found) == {"kueue"}


def test_a_controller_another_stack_or_team_installed_is_refused_to_install():
    theirs = Installed("jobset", "jobset-validating", ("jobset-system", "jobset"), {"namespace": "team-b", "stack": "b"})
    [problem] = controller_problems("install", ["jobset"], {"jobset": theirs}, "team-a")
    assert str(problem).startswith("existingCluster.controllers: 'install' but jobset is installed in this cluster "
                                   "already, by the gke-finetune stack 'b' of namespace 'team-b'")
    assert str(problem).endswith("allowed: existing (the stack uses the installed JobSet and Kueue)")
    platform = Installed("kueue", "kueue-validating-webhook-configuration")
    [problem] = controller_problems("install", ["jobset", "kueue"], {"kueue": platform}, "team-a")
    assert "by someone else (webhook configuration 'kueue-validating-webhook-configuration', not a Helm release)" \
        in str(problem)


def test_the_stacks_own_installation_and_existing_ones_pass():
    annotations = owner_values("jobset", "team-a", "a")["controller"]["annotations"]
    ours = Installed("jobset", "c", ("jobset-system", "jobset"), deployment_owner({"metadata": {"annotations": annotations}}))
    assert ours.owner == {"namespace": "team-a", "stack": "a"}
    assert controller_problems("install", ["jobset"], {"jobset": ours}, "team-a") == []
    assert controller_problems("install", ["jobset"], {}, "team-a") == []
    platform = Installed("jobset", "c")
    assert controller_problems("existing", ["jobset"], {"jobset": platform}, "team-a") == []
    [problem] = controller_problems("existing", ["jobset", "kueue"], {"jobset": platform}, "team-a")
    assert str(problem).startswith("existingCluster.controllers: 'existing' but kueue is not installed")


@pytest.mark.parametrize("create, labels, expected", [
    (False, {}, None),  # the platform team's namespace
    (False, None, "namespace: 'team-a' does not exist in this cluster"),
    (True, None, None),  # the stack makes it
    (True, {"gke-finetune/stack": "a"}, None),  # the stack made it on an earlier up
    (True, {}, "createNamespace: true but namespace 'team-a' exists already"),
    (True, {"gke-finetune/stack": "b"}, "createNamespace: true but namespace 'team-a' exists already"),
])
def test_a_stack_deploys_into_a_namespace_that_exists_or_declares_its_own(create, labels, expected):
    problems = [str(p) for p in namespace_problems("team-a", create, labels, "a")]
    if expected is None:
        assert problems == []
    else:
        assert len(problems) == 1 and problems[0].startswith(expected), problems


def test_a_helm_release_is_known_by_its_annotations():
    assert release_of(configuration("c", [], ("jobset-system", "jobset"))) == ("jobset-system", "jobset")
    assert release_of(configuration("c", [])) is None


def test_the_owner_is_read_from_the_controllers_deployment_as_each_chart_places_it():
    """JobSet's chart puts `controller.annotations` on its Deployment, Kueue's chart
    `controllerManager.manager.podAnnotations` on the pod template: either is read back."""
    jobset = owner_values("jobset", "team-a", "a")["controller"]["annotations"]
    kueue = owner_values("kueue", "team-b", "b")["controllerManager"]["manager"]["podAnnotations"]
    assert deployment_owner({"metadata": {"annotations": jobset}}) == {"namespace": "team-a", "stack": "a"}
    assert deployment_owner({"metadata": {}, "spec": {"template": {"metadata": {"annotations": kueue}}}}) == {
        "namespace": "team-b", "stack": "b"}
    assert deployment_owner({"metadata": {"annotations": {"other": "x"}}}) is None  # the platform team's


@pytest.mark.parametrize("controller, release, expected", [
    ("jobset", None, ControllerObjects("jobset-system", "jobset-controller")),
    ("kueue", None, ControllerObjects("kueue-system", "kueue-controller-manager", "kueue-manager-config")),
    # A release whose name doesn't hold the chart's: `<release>-<chart>` (the charts' fullname).
    ("kueue", ("platform", "queues"), ControllerObjects("platform", "queues-kueue-controller-manager",
                                                         "queues-kueue-manager-config")),
    ("jobset", ("batch", "my-jobset"), ControllerObjects("batch", "my-jobset-controller")),
])
def test_the_controllers_objects_are_named_as_their_charts_name_them(controller, release, expected):
    assert controller_objects(controller, release) == expected
