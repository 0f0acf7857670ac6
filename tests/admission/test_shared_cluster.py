"""A shared cluster's singletons and namespaces, judged before a stack declares anything there."""

from __future__ import annotations

import pytest

from admission.shared_cluster import (
    ControllerObjects, Installed, controller_objects, controller_of, controller_problems, deployment_owner, install_of,
    installed_controllers, namespace_problems, owner_values, release_of, release_problems, service_namespace,
)
from stack.controller_releases import DEFAULT_INSTALLS, ControllerInstall

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


@pytest.mark.parametrize("controller, install, expected", [
    # The stacks' own releases, and the install the docs name with Helm.
    ("jobset", DEFAULT_INSTALLS["jobset"], ControllerObjects("jobset-system", "jobset-controller")),
    ("kueue", DEFAULT_INSTALLS["kueue"], ControllerObjects("kueue-system", "kueue-controller-manager",
                                                           "kueue-manager-config")),
    # A release whose name doesn't hold the chart's: `<release>-<chart>` (the charts' fullname).
    ("kueue", ControllerInstall("platform", "queues"), ControllerObjects(
        "platform", "queues-kueue-controller-manager", "queues-kueue-manager-config")),
    ("jobset", ControllerInstall("batch", "my-jobset"), ControllerObjects("batch", "my-jobset-controller")),
    # The release manifests (kustomize's namePrefix on the manager's controller-manager), where they run.
    ("jobset", ControllerInstall("jobset-system"), ControllerObjects("jobset-system", "jobset-controller-manager")),
    ("kueue", ControllerInstall("kueue-system"), ControllerObjects("kueue-system", "kueue-controller-manager",
                                                                   "kueue-manager-config")),
    ("jobset", ControllerInstall("batch-system"), ControllerObjects("batch-system", "jobset-controller-manager")),
])
def test_the_controllers_objects_are_named_as_their_install_names_them(controller, install, expected):
    assert controller_objects(controller, install) == expected


def _service(namespace, name):
    return {"clientConfig": {"service": {"namespace": namespace, "name": name, "path": "/validate"}}}


# Each as the install writes it: the metadata and clientConfig of sigs.k8s.io/jobset v0.12.0 and
# sigs.k8s.io/kueue v0.19.2 (config/default/kustomization.yaml labels and namePrefix; the charts'
# templates/webhook/manifests.yaml and _helpers.tpl labels; Helm's release annotations).
JOBSET_MANIFESTS = {
    "metadata": {"name": "jobset-validating-webhook-configuration",
                 "labels": {"app.kubernetes.io/name": "jobset", "app.kubernetes.io/instance": "jobset",
                            "app.kubernetes.io/managed-by": "kustomize"}},
    "webhooks": [{**JOBSET_WEBHOOK, **_service("jobset-system", "jobset-webhook-service")}]}
KUEUE_MANIFESTS = {
    "metadata": {"name": "kueue-validating-webhook-configuration", "labels": {"app.kubernetes.io/name": "kueue"}},
    "webhooks": [{**w, **_service("kueue-system", "kueue-webhook-service")} for w in KUEUE_WEBHOOKS]}
CHART_LABELS = {"helm.sh/chart": "kueue-0.19.2", "app.kubernetes.io/instance": "queues",
                "app.kubernetes.io/managed-by": "Helm"}


def _helm(configuration, namespace, release):
    metadata = {**configuration["metadata"], "labels": CHART_LABELS | {"app.kubernetes.io/instance": release},
                "annotations": {"meta.helm.sh/release-namespace": namespace, "meta.helm.sh/release-name": release}}
    webhooks = [{**w, **_service(namespace, f"{release}-webhook-service")} for w in configuration["webhooks"]]
    return {"metadata": metadata, "webhooks": webhooks}


@pytest.mark.parametrize("controller, configuration, expected", [
    # The release manifests: no Helm annotation, no chart label (JobSet's carry kustomize's instance label).
    ("jobset", JOBSET_MANIFESTS, ControllerInstall("jobset-system")),
    ("kueue", KUEUE_MANIFESTS, ControllerInstall("kueue-system")),
    # Moved by the platform team: where the webhooks' Service is.
    ("kueue", {**KUEUE_MANIFESTS, "webhooks": [{**w, **_service("queues", "kueue-webhook-service")}
                                               for w in KUEUE_WEBHOOKS]}, ControllerInstall("queues")),
    # A Helm release, by Helm's annotations.
    ("kueue", _helm(KUEUE_MANIFESTS, "platform", "queues"), ControllerInstall("platform", "queues")),
    # The chart rendered without Helm installing it (`helm template`, Argo CD): the chart's labels.
    ("kueue", {"metadata": {"name": "queues-kueue-validating-webhook-configuration", "labels": CHART_LABELS},
               "webhooks": [{**w, **_service("platform", "queues-kueue-webhook-service")} for w in KUEUE_WEBHOOKS]},
     ControllerInstall("platform", "queues")),
    # Webhooks called by url: the release's namespace, else the project's own.
    ("jobset", configuration("c", [JOBSET_WEBHOOK], ("batch", "my-jobset")), ControllerInstall("batch", "my-jobset")),
    ("jobset", configuration("c", [JOBSET_WEBHOOK]), ControllerInstall("jobset-system")),
])
def test_how_a_controller_is_installed_and_where_it_runs_come_from_its_webhook_configuration(
        controller, configuration, expected):
    assert install_of(controller, configuration) == expected


def test_where_a_controller_runs_is_its_webhooks_service_s_namespace():
    assert service_namespace(KUEUE_MANIFESTS) == "kueue-system"
    assert service_namespace(configuration("c", [{**JOBSET_WEBHOOK, "clientConfig": {"url": "https://x/v"}}])) is None


def test_a_key_that_names_other_objects_than_the_cluster_s_install_is_refused_naming_the_value_to_set():
    """JobSet from its release manifests, the key at its default (the stacks' Helm release): the preview
    reads `jobset-controller-manager`, the handoff grants `jobset-controller`."""
    found = install_of("jobset", JOBSET_MANIFESTS)
    [problem] = release_problems("jobset", DEFAULT_INSTALLS["jobset"], found, "team-a")
    assert str(problem) == (
        "existingCluster.controllerReleases.jobset: 'jobset-system/jobset' but jobset is installed from its release "
        "manifests in namespace 'jobset-system' (its webhook configuration says so): the preview reads its "
        "Deployment jobset-system/jobset-controller-manager, and `make handoff` grants get on Deployment "
        "jobset-system/jobset-controller only; allowed: manifests; then the platform team applies the RBAC of "
        "`make handoff STACK=team-a` again, so that the deployer may read them")
    assert release_problems("jobset", ControllerInstall("jobset-system"), found, "team-a") == []
    helm = install_of("kueue", _helm(KUEUE_MANIFESTS, "platform", "queues"))
    [problem] = release_problems("kueue", DEFAULT_INSTALLS["kueue"], helm, "team-a")
    assert problem.allowed.startswith("platform/queues;") and "ConfigMap platform/queues-kueue-manager-config" \
        in problem.why


def test_kueue_s_manifests_and_its_default_release_name_the_same_objects_and_pass_either_way():
    """Kueue's chart under release `kueue` and its release manifests both give `kueue-controller-manager` and
    `kueue-manager-config` in kueue-system: the handoff's Role covers either, so either value passes."""
    manifests = install_of("kueue", KUEUE_MANIFESTS)
    assert release_problems("kueue", DEFAULT_INSTALLS["kueue"], manifests, "team-a") == []
    assert release_problems("kueue", ControllerInstall("kueue-system"), DEFAULT_INSTALLS["kueue"], "team-a") == []
    moved = ControllerInstall("queues")
    [problem] = release_problems("kueue", DEFAULT_INSTALLS["kueue"], moved, "team-a")
    assert problem.allowed.startswith("manifests:queues;")
