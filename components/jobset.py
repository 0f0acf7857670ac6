"""The JobSet controller, from its official Helm chart.

https://jobset.sigs.k8s.io/docs/installation/ — the chart on registry.k8s.io
is versioned without the `v` of the release tag.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.kube import controller_release
from core.names import JOBSET_CHART, JOBSET_CHART_VERSION, JOBSET_NAMESPACE
from manifests.controllers import chart_source
from stack.existing import Charts


@dataclass
class JobSetControllerArgs:
    provider: k8s.Provider
    depends_on: list[pulumi.Resource] = field(default_factory=list)  # nodes to run on
    charts: Charts = field(default_factory=Charts)  # where the chart comes from (upstream by default)
    values: dict | None = None  # the release's values: who installed it (admission/shared_cluster.py)


class JobSetController(pulumi.ComponentResource):
    """Installs the controller; runs depend on `release` so their CRD exists first."""

    release: k8s.helm.v3.Release

    def __init__(self, name: str, args: JobSetControllerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-finetune:platform:JobSetController", name, None, opts)
        # Awaited: the controller and its webhook exist before anything submits a JobSet.
        self.release = controller_release(
            name, "jobset", chart_source(JOBSET_CHART, JOBSET_CHART_VERSION, args.charts), JOBSET_NAMESPACE,
            pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.depends_on),
            values=args.values,
        )
        self.register_outputs({"version": JOBSET_CHART_VERSION})
