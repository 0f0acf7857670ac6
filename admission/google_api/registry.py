"""The Artifact Registry repository and the nodes' grant on it: Pulumi inputs -> Artifact Registry v1.

resource_artifact_registry_repository.go `resourceArtifactRegistryRepositoryCreate`
POSTs the repository to `projects/{project}/locations/{location}/repositories`
with its id as a query parameter; a member grant is a read-modify-write of
the repository's IAM policy (iam_artifact_registry_repository.go
`ArtifactRegistryRepositoryIamUpdater.SetResourceIamPolicy`, `{"policy": ...}`
to `...:setIamPolicy`), of which the binding the program adds is judged.
"""

from __future__ import annotations

from admission.google_api.rules import Field, Param, ResourceMapping, last_segment

API = "artifactregistry.v1"

REPOSITORY = ResourceMapping(
    type="gcp:artifactregistry/repository:Repository",
    api=API,
    method="artifactregistry.projects.locations.repositories.create",
    params={"parent": "projects/{project}/locations/{location}", "repositoryId": "{repositoryId}"},
    source="resource_artifact_registry_repository.go resourceArtifactRegistryRepositoryCreate",
    fields={
        "project": Param("project"),
        "location": Param("location"),
        "repositoryId": Param("repositoryId"),
        "format": Field("format"),
        "description": Field("description"),
    },
)

REPOSITORY_IAM_MEMBER = ResourceMapping(
    type="gcp:artifactregistry/repositoryIamMember:RepositoryIamMember",
    api=API,
    method="artifactregistry.projects.locations.repositories.setIamPolicy",
    params={"resource": "projects/{project}/locations/{location}/repositories/{repository}"},
    source="iam_artifact_registry_repository.go ArtifactRegistryRepositoryIamUpdater.SetResourceIamPolicy",
    fields={
        "project": Param("project"),
        "location": Param("location"),
        # The repository's id or its full name (ArtifactRegistryRepositoryIdParseFunc).
        "repository": Param("repository", last_segment),
        "role": Field("policy.bindings[0].role"),
        "member": Field("policy.bindings[0].members[0]", source="resource_iam_member.go getResourceIamMember"),
    },
)
