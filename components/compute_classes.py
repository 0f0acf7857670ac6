"""The ComputeClasses of an Autopilot stack's capacity ladders (manifests/compute_class.py).

GKE serves the `cloud.google.com/v1` ComputeClass kind in every eligible
cluster, Autopilot included, so nothing is installed first; a run waits for
its class, which its pods select, before it is applied.
https://cloud.google.com/kubernetes-engine/docs/concepts/about-custom-compute-classes
A stack declares this component only when `config.compute_classes()` is not
empty (stack/queueing.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.kueue import KubernetesObject, renamed_alias
from core.contract import SchedulingContract
from manifests.compute_class import compute_class_manifests


@dataclass
class ComputeClassesArgs:
    classes: Mapping[str, Sequence[SchedulingContract]]  # class name -> its ladder's rungs, in order
    provider: k8s.Provider
    depends_on: list[pulumi.Resource] = field(default_factory=list)  # the cluster
    renamed: Mapping[str, str] = field(default_factory=dict)  # class name -> its former name (aliases)


class ComputeClasses(pulumi.ComponentResource):
    """One ComputeClass per Autopilot ladder; runs depend on `ready`."""

    objects: dict[str, KubernetesObject]

    def __init__(self, name: str, args: ComputeClassesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-finetune:platform:ComputeClasses", name, None, opts)
        self.objects = {
            key: KubernetesObject(
                f"{name}-{key}", manifest,
                pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.depends_on,
                                       aliases=renamed_alias(name, _former_key(key, args.renamed))),
            )
            for key, manifest in compute_class_manifests(args.classes).items()
        }
        self.register_outputs({"objects": sorted(self.objects)})

    @property
    def ready(self) -> list[pulumi.Resource]:
        return list(self.objects.values())


def _former_key(key: str, renamed: Mapping[str, str]) -> str | None:
    """The manifest key (`computeclass-<name>`) a class had under its former name, if it had another."""
    name = key.removeprefix("computeclass-")
    return f"computeclass-{renamed[name]}" if renamed.get(name, name) != name else None
