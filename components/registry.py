"""The Artifact Registry Docker repository the trainer images are pushed to."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from core.ids import registry_url


@dataclass
class RegistryArgs:
    project: str
    region: str
    repository_id: str
    reader_member: pulumi.Input[str]  # the node service account pulls images


class Registry(pulumi.ComponentResource):
    """A Docker repository, readable by the nodes and nobody else by grant of this stack."""

    repository: gcp.artifactregistry.Repository
    url: pulumi.Output[str]

    def __init__(self, name: str, args: RegistryArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-finetune:platform:Registry", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.repository = gcp.artifactregistry.Repository(
            name,
            project=args.project,
            location=args.region,
            repository_id=args.repository_id,
            format="DOCKER",
            description="Trainer images, referenced by digest",
            opts=child,
        )
        # Granted on the repository, not the project: nodes can pull these images only.
        gcp.artifactregistry.RepositoryIamMember(
            f"{name}-node-reader",
            project=args.project,
            location=args.region,
            repository=self.repository.repository_id,
            role="roles/artifactregistry.reader",
            member=args.reader_member,
            opts=child,
        )
        self.url = self.repository.repository_id.apply(lambda rid: registry_url(args.region, args.project, rid))
        self.register_outputs({"url": self.url})
