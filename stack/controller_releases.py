"""`existingCluster.controllerReleases`: how the platform team installed JobSet and Kueue.

With `controllers: existing` the preview reads each installed controller's
Deployment (its image: the version) and Kueue's manager ConfigMap by name, and
`make handoff`, which has no cluster to look at, grants `get` on exactly those
names (tools/plan/rbac.py). The names follow from how the controller was
installed (admission/shared_cluster.py `controller_objects` names them):

- `<namespace>/<release>`: a Helm release of the project's chart; the chart
  names the objects after the release;
- `manifests`: the project's release manifests (`kubectl apply --server-side
  -f .../manifests.yaml`, the install xpk does and the JobSet and Kueue docs
  give first), which kustomize names with a fixed prefix in their own
  namespace (jobset-system, kueue-system); `manifests:<namespace>` where the
  platform team moved them into another.

Default: the Helm releases a stack installs (`jobset-system/jobset`,
`kueue-system/kueue`). The preview finds the install on the cluster and
refuses a value that names other objects than the ones it finds there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import Field, model_validator

from core.names import JOBSET_NAMESPACE, KUEUE_NAMESPACE
from core.syntax import DNS_1123_LABEL, DNS_LABEL_MAX
from stack.models import StackModel
from stack.problems import Problem, Problems, raise_problems

MANIFESTS = "manifests"
# Where each project's release manifests install their controller (config/default/kustomization.yaml
# `namespace:` of sigs.k8s.io/jobset v0.12.0 and sigs.k8s.io/kueue v0.19.2), which the stacks' Helm releases
# use too (components/jobset.py, components/kueue.py).
HOME_NAMESPACES = {"jobset": JOBSET_NAMESPACE, "kueue": KUEUE_NAMESPACE}
# A Helm release's name: a DNS-1123 subdomain of at most 53 characters (helm.sh/helm/v3
# pkg/chartutil/validate_name.go `ValidateReleaseName`).
RELEASE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
RELEASE_NAME_MAX = 53
ALLOWED = ("<namespace>/<Helm release name> (a Helm release of the project's chart), manifests (the project's "
           "release manifests, in {home}) or manifests:<namespace> (the release manifests in another namespace)")


@dataclass(frozen=True)
class ControllerInstall:
    """How a controller is installed, which names its objects: a Helm release, or the release manifests."""

    namespace: str  # where the controller runs
    release: str | None = None  # the Helm release's name; None: the project's release manifests

    def value(self, controller: str) -> str:
        """As `existingCluster.controllerReleases.<controller>` says it."""
        if self.release is not None:
            return f"{self.namespace}/{self.release}"
        return MANIFESTS if self.namespace == HOME_NAMESPACES[controller] else f"{MANIFESTS}:{self.namespace}"

    def described(self) -> str:
        if self.release is not None:
            return f"as Helm release {self.release!r} in namespace {self.namespace!r}"
        return f"from its release manifests in namespace {self.namespace!r}"


DEFAULT_INSTALLS = {c: ControllerInstall(ns, c) for c, ns in HOME_NAMESPACES.items()}


def _namespace_ok(namespace: str) -> bool:
    return len(namespace) <= DNS_LABEL_MAX and bool(DNS_1123_LABEL.fullmatch(namespace))


def controller_install(controller: str, value: str) -> ControllerInstall:
    """The install a key's value says; Problems (keyed by the controller) when it says none."""
    if value == MANIFESTS:
        return ControllerInstall(HOME_NAMESPACES[controller])
    namespace, colon, rest = value.partition(":")
    if namespace == MANIFESTS and colon and _namespace_ok(rest):
        return ControllerInstall(rest)
    namespace, slash, release = value.partition("/")
    if slash and _namespace_ok(namespace) and len(release) <= RELEASE_NAME_MAX and RELEASE_NAME.fullmatch(release):
        return ControllerInstall(namespace, release)
    raise Problems([Problem(controller, value, f"does not say how {controller} is installed",
                            ALLOWED.format(home=HOME_NAMESPACES[controller]))])


class ControllerReleases(StackModel):
    """`existingCluster.controllerReleases`: how each installed controller was installed."""

    jobset: str = Field(default=DEFAULT_INSTALLS["jobset"].value("jobset"),
                        description="<namespace>/<Helm release> | manifests | manifests:<namespace>")
    kueue: str = Field(default=DEFAULT_INSTALLS["kueue"].value("kueue"),
                       description="<namespace>/<Helm release> | manifests | manifests:<namespace>")

    @model_validator(mode="after")
    def _installs(self) -> ControllerReleases:
        problems = []
        for controller in HOME_NAMESPACES:
            try:
                controller_install(controller, getattr(self, controller))
            except Problems as err:
                problems += err.items
        raise_problems(problems)
        return self

    def install(self, controller: str) -> ControllerInstall:
        return controller_install(controller, getattr(self, controller))

    @property
    def is_default(self) -> bool:
        return all(self.install(c) == DEFAULT_INSTALLS[c] for c in HOME_NAMESPACES)
