"""The project's APIs, enabled before anything that uses them and never disabled on destroy."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp


@dataclass
class ProjectApisArgs:
    project: str
    services: Sequence[str]  # e.g. container.googleapis.com (stack/apis.py)


class ProjectApis(pulumi.ComponentResource):
    """One `gcp.projects.Service` per API; `dependents` makes every resource of a component wait for them."""

    services: list[gcp.projects.Service]
    dependents: pulumi.ResourceOptions

    def __init__(self, name: str, args: ProjectApisArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-finetune:platform:ProjectApis", name, None, opts)
        self.services = [
            gcp.projects.Service(
                f"{name}-{service.split('.')[0]}",
                project=args.project,
                service=service,
                # Left enabled by `pulumi destroy`: other workloads of the project
                # may use them, and disabling GKE's or Compute's API with resources
                # left (the kept bucket) fails. pulumi_gcp projects/service.py.
                disable_on_destroy=False,
                disable_dependent_services=False,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for service in args.services
        ]
        # A component's depends_on does not reach its children; a transformation
        # does (pulumi/resource.py applies a parent's transformations to its children).
        self.dependents = pulumi.ResourceOptions(transformations=[self._after_apis])
        self.register_outputs({"services": list(args.services)})

    def _after_apis(self, args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
        if args.type_.startswith("pulumi:providers:"):
            return None
        waits = pulumi.ResourceOptions(depends_on=self.services)
        return pulumi.ResourceTransformationResult(args.props, pulumi.ResourceOptions.merge(args.opts, waits))
