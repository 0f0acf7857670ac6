"""What an existing cluster already holds, judged before a stack declares anything in it.

A platform team's cluster is shared: other teams and other stacks deploy into
it, each in its own namespace. Two things there are singletons the stack must
not take over: the JobSet and Kueue controllers (their CRDs, webhooks and
managers exist once per cluster). A stack installs them only where nobody else
has (`existingCluster.controllers: install`), and uses the installed ones
otherwise (`existing`); and it deploys into a namespace that exists unless it
says `createNamespace: true`.

Pure functions over the objects the cluster returns (components/preflight.py
reads them): which controllers are installed, by whom, and the problems of the
stack's keys against that.

A controller counts as installed when its admission webhooks are registered:
JobSet validates and defaults JobSets through a webhook on the
`jobset.x-k8s.io` group, Kueue through webhooks on `kueue.x-k8s.io`
(charts/jobset/templates/webhook/manifests.yaml of sigs.k8s.io/jobset
v0.12.0; charts/kueue/templates/webhook/manifests.yaml of sigs.k8s.io/kueue
v0.19.2). Kueue also registers a webhook on JobSets (its JobSet integration),
so a configuration that holds Kueue's own webhooks is Kueue's, not JobSet's.
CRDs are no such sign: JobSet's chart installs them from `crds/`, which Helm
never deletes, so they outlive an uninstall.

Who installed it: the configuration's Helm release (`meta.helm.sh/release-name`
and `-namespace`, which Helm sets on every object of a release) and the
`gke-finetune/owner` annotation (`<namespace>/<stack>`) a stack installs the
controller's Deployment with (`owner_values`): JobSet's chart puts
`controller.annotations` on its Deployment (v0.12.0
charts/jobset/templates/controller/deployment.yaml), Kueue's chart
`controllerManager.manager.podAnnotations` on its Deployment's pod template
(v0.19.2 charts/kueue/templates/manager/manager.yaml). A Deployment is what a
read-only previewer may read; a Helm release's values live in a Secret, which
it may not (and should not).

How it is installed names what the preview reads of it (`controller_objects`):
a Helm release's chart names its objects after the release, the projects'
release manifests (`kubectl apply --server-side -f manifests.yaml`) with
kustomize's fixed prefix. Where it runs is the namespace of the Service its
webhooks call. The stack says which install it expects
(`existingCluster.controllerReleases`, stack/controller_releases.py), since
`make handoff` grants the reads offline; a cluster that shows another is
refused (`release_problems`), naming the value to set.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from core.names import STACK_LABEL, stack_label_value
from stack.controller_releases import HOME_NAMESPACES, ControllerInstall
from stack.problems import Problem

JOBSET_GROUP = "jobset.x-k8s.io"
KUEUE_GROUP = "kueue.x-k8s.io"
CONTROLLERS = ("jobset", "kueue")
RELEASE_NAME = "meta.helm.sh/release-name"
RELEASE_NAMESPACE = "meta.helm.sh/release-namespace"
OWNER_ANNOTATION = "gke-finetune/owner"
# The labels every object of the charts carries (charts/<chart>/templates/_helpers.tpl `<chart>.labels`).
CHART_LABEL = "helm.sh/chart"
INSTANCE_LABEL = "app.kubernetes.io/instance"


def owner_values(controller: str, namespace: str, stack: str) -> dict:
    """The Helm values that mark a controller's Deployment with the stack that installed it."""
    owner = {OWNER_ANNOTATION: f"{namespace}/{stack}"}
    if controller == "kueue":
        return {"controllerManager": {"manager": {"podAnnotations": owner}}}
    return {"controller": {"annotations": owner}}


def deployment_owner(deployment: Mapping) -> Mapping | None:
    """The stack a controller's Deployment says installed it ({namespace, stack}), if any."""
    annotations = {**((deployment.get("spec") or {}).get("template", {}).get("metadata") or {}).get("annotations", {}),
                   **((deployment.get("metadata") or {}).get("annotations") or {})}
    namespace, slash, stack = str(annotations.get(OWNER_ANNOTATION, "")).partition("/")
    return {"namespace": namespace, "stack": stack} if slash else None


@dataclass(frozen=True)
class Installed:
    """A controller found in the cluster, and who installed it."""

    controller: str  # jobset | kueue
    configuration: str  # the webhook configuration that shows it
    release: tuple[str, str] | None = None  # (namespace, name) of its Helm release; None: not by Helm
    owner: Mapping | None = None  # its Deployment's `gke-finetune/owner` ({namespace, stack}); None: not a stack's
    install: ControllerInstall | None = None  # how it is installed, where it runs (`install_of`); None: not read

    def installed_by(self) -> str:
        if self.owner:
            return f"the gke-finetune stack {self.owner.get('stack')!r} of namespace {self.owner.get('namespace')!r}"
        if self.release:
            return f"Helm release {self.release[1]!r} in namespace {self.release[0]!r}, not a gke-finetune stack's"
        return f"someone else (webhook configuration {self.configuration!r}, not a Helm release)"


def _groups(webhook: Mapping) -> set[str]:
    return {g for rule in webhook.get("rules") or () for g in rule.get("apiGroups") or ()}


def controller_of(configuration: Mapping) -> str | None:
    """Which controller a webhook configuration belongs to, if either."""
    groups = set().union(*(_groups(w) for w in configuration.get("webhooks") or ()))
    if KUEUE_GROUP in groups:
        return "kueue"
    if JOBSET_GROUP in groups:
        return "jobset"
    return None


def installed_controllers(configurations: Iterable[Mapping]) -> dict[str, Mapping]:
    """The controllers the cluster's webhook configurations show, each with one of its configurations."""
    found: dict[str, Mapping] = {}
    for configuration in configurations:
        controller = controller_of(configuration)
        if controller and controller not in found:
            found[controller] = configuration
    return found


@dataclass(frozen=True)
class ControllerObjects:
    """What the preview reads of an installed controller: its Deployment (its image: the version) and, for
    Kueue, its manager ConfigMap (its configuration)."""

    namespace: str
    deployment: str
    config_map: str | None = None

    def described(self) -> str:
        config_map = f" and ConfigMap {self.namespace}/{self.config_map}" if self.config_map else ""
        return f"Deployment {self.namespace}/{self.deployment}{config_map}"


def _fullname(chart: str, release: str) -> str:
    """The charts' `<chart>.fullname` without fullnameOverride: the release name where it holds the chart's
    name, else `<release>-<chart>`, 63 characters at most (v0.12.0 charts/jobset/templates/_helpers.tpl,
    v0.19.2 charts/kueue/templates/_helpers.tpl)."""
    name = release if chart in release else f"{release}-{chart}"
    return name[:63].rstrip("-")


def controller_objects(controller: str, install: ControllerInstall) -> ControllerObjects:
    """The objects the preview reads of a controller installed as `install` says, in its namespace. Read by
    name, so that a Role can grant exactly these (tools/plan/rbac.py `controller_reads`).

    A Helm release: JobSet's Deployment is `<fullname>-controller` (charts/jobset/templates/controller/
    _helpers.tpl `jobset.controller.name`), Kueue's `<fullname>-controller-manager` and its ConfigMap
    `<fullname>-manager-config` (charts/kueue/templates/manager/manager.yaml, manager-config.yaml).
    The release manifests: kustomize prefixes every name with `<project>-` (config/default/kustomization.yaml
    `namePrefix` of JobSet v0.12.0 and Kueue v0.19.2) to the manager's `controller-manager`
    (config/components/manager/manager.yaml) and Kueue's `manager-config`, generated without a hash suffix
    (config/components/manager/kustomization.yaml `disableNameSuffixHash`)."""
    if install.release is None:
        prefix, manager = controller, "controller-manager"
    else:
        prefix, manager = _fullname(controller, install.release), _CHART_MANAGER[controller]
    config_map = f"{prefix}-manager-config" if controller == "kueue" else None
    return ControllerObjects(install.namespace, f"{prefix}-{manager}", config_map)


_CHART_MANAGER = {"jobset": "controller", "kueue": "controller-manager"}


def release_of(configuration: Mapping) -> tuple[str, str] | None:
    annotations = (configuration.get("metadata") or {}).get("annotations") or {}
    if RELEASE_NAME in annotations and RELEASE_NAMESPACE in annotations:
        return annotations[RELEASE_NAMESPACE], annotations[RELEASE_NAME]
    return None


def service_namespace(configuration: Mapping) -> str | None:
    """The namespace of the Service the configuration's webhooks call: where the controller runs, however it
    was installed (admissionregistration.k8s.io/v1 `webhooks[].clientConfig.service.namespace`). None where
    the webhooks call a `url` instead."""
    for webhook in configuration.get("webhooks") or ():
        namespace = ((webhook.get("clientConfig") or {}).get("service") or {}).get("namespace")
        if namespace:
            return namespace
    return None


def install_of(controller: str, configuration: Mapping) -> ControllerInstall:
    """How a controller is installed, from its webhook configuration: a Helm release by Helm's annotations,
    or by the chart's labels where the chart was rendered without Helm installing it (`helm template`, as
    Argo CD does: `helm.sh/chart`, and the release as `app.kubernetes.io/instance`,
    charts/<chart>/templates/_helpers.tpl `<chart>.labels`); otherwise the release manifests, whose
    configurations carry neither. It runs where its webhooks' Service is; with webhooks called by url, in its
    Helm release's namespace, else in the project's own namespace."""
    release = release_of(configuration)
    labels = (configuration.get("metadata") or {}).get("labels") or {}
    namespace = service_namespace(configuration) or (release[0] if release else HOME_NAMESPACES[controller])
    if release:
        return ControllerInstall(namespace, release[1])
    if CHART_LABEL in labels and labels.get(INSTANCE_LABEL):
        return ControllerInstall(namespace, labels[INSTANCE_LABEL])
    return ControllerInstall(namespace)


def release_problems(controller: str, said: ControllerInstall, found: ControllerInstall, stack: str) -> list[Problem]:
    """`existingCluster.controllerReleases.<controller>` against the install the cluster shows: where they name
    other objects, the handoff's Role (granted from the key, offline) doesn't cover what the preview reads."""
    read, granted = controller_objects(controller, found), controller_objects(controller, said)
    if read == granted:
        return []
    return [Problem(
        f"existingCluster.controllerReleases.{controller}", said.value(controller),
        f"but {controller} is installed {found.described()} (its webhook configuration says so): the preview reads "
        f"its {read.described()}, and `make handoff` grants get on {granted.described()} only",
        f"{found.value(controller)}; then the platform team applies the RBAC of `make handoff STACK={stack}` "
        "again, so that the deployer may read them")]


def controller_problems(controllers: str, needed: Iterable[str], found: Mapping[str, Installed],
                        namespace: str) -> list[Problem]:
    """`existingCluster.controllers` against what the cluster holds: `install` where another has installed
    one, `existing` where one the runs need is missing."""
    problems = []
    for controller in needed:
        installed = found.get(controller)
        if controllers == "install" and installed is not None and (installed.owner or {}).get("namespace") != namespace:
            problems.append(Problem(
                "existingCluster.controllers", controllers,
                f"but {controller} is installed in this cluster already, by {installed.installed_by()}: a cluster "
                "has one of each, and the stack would install it a second time over the one other stacks use",
                "existing (the stack uses the installed JobSet and Kueue)"))
        if controllers == "existing" and installed is None:
            problems.append(Problem(
                "existingCluster.controllers", controllers,
                f"but {controller} is not installed in this cluster (no webhook on {_GROUP_OF[controller]})",
                "install (only where no other stack or team shares the cluster), or ask the platform team to "
                f"install {controller}"))
    return problems


_GROUP_OF = {"jobset": JOBSET_GROUP, "kueue": KUEUE_GROUP}


def namespace_problems(namespace: str, create: bool, labels: Mapping[str, str] | None, stack: str) -> list[Problem]:
    """The stack deploys into a namespace that exists (`labels`: its labels; None: it doesn't exist), or into
    one it declares (`createNamespace: true`), which is new or already the stack's own."""
    exists = labels is not None
    if exists and create and labels.get(STACK_LABEL) != stack_label_value(stack):
        return [Problem("createNamespace", True, f"but namespace {namespace!r} exists already in this cluster: the "
                        "stack would take it over, and delete it (with whatever else it holds) on destroy",
                        "false (deploy into the existing namespace)")]
    if not exists and not create:
        return [Problem("namespace", namespace, "does not exist in this cluster",
                        "a namespace the platform team made for the stack, or createNamespace: true")]
    return []
