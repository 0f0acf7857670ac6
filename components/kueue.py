"""Kueue, from its official Helm chart, and the stack's queueing objects (manifests/kueue.py).

https://kueue.sigs.k8s.io/docs/installation/ — the chart on registry.k8s.io
is versioned without the `v` of the release tag. It is installed with the
JobSet integration only and scoped to the runs' namespace
(manifests/controllers.py, `kueue_chart_values`), and the
provisioning admission check controller is part of Kueue and on by default
(GA since v0.14: site/content/en/docs/concepts/admission_check/provisioning_request.md).
A stack installs Kueue only when `config.kueue_flavors()` is not empty
(stack/queueing.py); the program then declares this component, and in it the
ladder controller's objects where a run's ladder can move (manifests/ladder.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.kube import controller_release
from core.contract import SchedulingContract
from core.names import KUEUE_CHART, KUEUE_CHART_VERSION, KUEUE_NAMESPACE, SHARED_PREFIX
from manifests.controllers import chart_source, kueue_chart_values
from manifests.kueue import kueue_manifests, renamed_from
from stack.existing import Charts
from stack.sharing import KueueSettings


@dataclass
class KueueArgs:
    flavors: Sequence[SchedulingContract]  # the pools Kueue admits runs to, in the order it tries them
    provider: k8s.Provider
    namespace: str  # the runs' namespace, whose jobs the Kueue the stack installs manages
    # The nodes the controller runs on; the LocalQueue's namespace.
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    namespace_dependencies: list[pulumi.Resource] = field(default_factory=list)
    charts: Charts = field(default_factory=Charts)  # where the chart comes from (upstream by default)
    owner: dict = field(default_factory=dict)  # values that say who installed it (admission/shared_cluster.py)
    # False: the cluster's platform team installed Kueue (an existing cluster's `controllers: existing`);
    # only the stack's queueing objects are declared.
    install: bool = True
    settings: KueueSettings = field(default_factory=KueueSettings)  # the installed Kueue's (stack/sharing.py)
    # The ladder controller's objects in the runs' namespace (manifests/ladder.py); empty without a ladder.
    ladder: Mapping[str, Mapping] = field(default_factory=dict)


class KubernetesObject(pulumi.CustomResource):
    """A Kubernetes object of any kind, declared as its manifest says, top-level fields included.

    `apiextensions.CustomResource` takes only `metadata` and `spec`; a
    WorkloadPriorityClass keeps `value` and `description` at the top level.
    The Kubernetes provider applies the object's inputs as they are.
    """

    def __init__(self, name: str, manifest: Mapping, opts: pulumi.ResourceOptions | None = None,
                 shared: bool = False):
        kind = f"{manifest['kind']}Patch" if shared else manifest["kind"]
        # The core group's type tokens say `core/v1` where the manifest says `v1` (kubernetes:core/v1:ConfigMap).
        api = manifest["apiVersion"] if "/" in manifest["apiVersion"] else f"core/{manifest['apiVersion']}"
        super().__init__(f"kubernetes:{api}:{kind}", name, dict(manifest), opts)


def shared_object(manifest: Mapping) -> bool:
    """An object other stacks declare too (a shared pool's ResourceFlavor, core/names.py SHARED_PREFIX).

    It is declared as the provider's Patch resource of its kind: a server-side apply with a field manager of its
    own, which creates the object where it is missing and co-owns its fields where another stack applied the same
    values, and whose delete relinquishes this stack's fields and never deletes the object
    (pulumi-kubernetes v4.25.0 provider/pkg/await/await.go `Deletion`: `ssa.Relinquish` for a Patch resource;
    pkg/kinds/util.go `IsPatchResource`: the type token `<kind>Patch`;
    https://www.pulumi.com/registry/packages/kubernetes/how-to-guides/managing-resources-with-server-side-apply/).
    A plain create would fail where another stack made it (AlreadyExists since 4.29.0, pulumi-kubernetes #2926),
    and its delete would take a flavor another stack's ClusterQueue still names. The flavor stays after the last
    stack's destroy, without the fields the stacks applied; a platform team deletes it once no ClusterQueue names
    it (docs/existing-clusters.md)."""
    return manifest["kind"] == "ResourceFlavor" and manifest["metadata"]["name"].startswith(SHARED_PREFIX)


class Kueue(pulumi.ComponentResource):
    """Installs Kueue and declares the queues; runs depend on `ready` (webhook, queue and flavors)."""

    release: k8s.helm.v3.Release | None
    objects: dict[str, KubernetesObject]

    def __init__(self, name: str, args: KueueArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-finetune:platform:Kueue", name, None, opts)
        # Awaited: the controller and its webhooks default and admit every queued JobSet.
        self.release = controller_release(
            name, "kueue", chart_source(KUEUE_CHART, KUEUE_CHART_VERSION, args.charts), KUEUE_NAMESPACE,
            pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.depends_on),
            values={**kueue_chart_values(args.namespace, args.settings), **args.owner},
        ) if args.install else None
        manifests = {**kueue_manifests(args.flavors), **args.ladder}
        self._ladder_keys = set(args.ladder)
        renamed = renamed_from(args.flavors)
        self.objects = {}
        for key, manifest in manifests.items():
            # A Deployment after what its pods use (the ladder controller's ConfigMap, service account, Role).
            before = [o for k, o in self.objects.items() if manifest["kind"] == "Deployment" and
                      manifests[k]["kind"] in ("ConfigMap", "ServiceAccount", "Role", "RoleBinding")]
            self.objects[key] = self._object(name, key, manifest, args, renamed.get(key), before)
        self.register_outputs({"version": KUEUE_CHART_VERSION, "objects": sorted(self.objects)})

    @property
    def ready(self) -> list[pulumi.Resource]:
        """What a queued run waits for: the controller (where the stack installs it) and every queueing object;
        not the ladder controller, which acts only once a run is evicted (its Deployment is awaited on its own)."""
        return [*([self.release] if self.release else []),
                *(o for key, o in self.objects.items() if key not in self._ladder_keys)]

    def _object(self, name: str, key: str, manifest: Mapping, args: KueueArgs, old_key: str | None,
                before: Sequence[pulumi.Resource] = ()) -> KubernetesObject:
        # The CRDs and webhooks come with the chart; a LocalQueue also needs its namespace.
        depends = [*([self.release] if self.release else args.depends_on), *before]
        depends += args.namespace_dependencies if "namespace" in manifest["metadata"] else []
        return KubernetesObject(
            f"{name}-{key}", manifest,
            pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=depends,
                                   aliases=renamed_alias(name, old_key)),
            shared=shared_object(manifest),
        )


def renamed_alias(name: str, old_key: str | None) -> list[pulumi.Alias]:
    """The alias of an object the stack declared under another name (manifests/kueue.py `renamed_from`).

    With it the engine takes the object in the state as this one, and the provider replaces it, since its
    `metadata.name` changed (a preview shows `replace`, create before delete: the new object first, the
    ClusterQueue updated to name it, the old one deleted last); without it a preview would show an unrelated
    delete and create. https://www.pulumi.com/docs/iac/concepts/resources/options/aliases/"""
    return [pulumi.Alias(name=f"{name}-{old_key}")] if old_key else []
