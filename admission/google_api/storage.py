"""The data bucket and the grants on it: Pulumi inputs -> Cloud Storage's JSON API v1.

resource_storage_bucket.go `resourceStorageBucketCreate` inserts the bucket
(`storage.buckets.insert`, the project as a query parameter); a member grant
is a read-modify-write of the bucket's IAM policy
(tpgiamresource/resource_iam_member.go `resourceIamMemberCreate`, whose
binding goes into the policy iam_storage_bucket.go
`StorageBucketIamUpdater.SetResourceIamPolicy` PUTs to `b/{bucket}/iam`,
`storage.buckets.setIamPolicy`). Only the binding the program adds is
judged; the rest of the policy is what the bucket already has.
"""

from __future__ import annotations

from admission.google_api.rules import Field, NotSent, Param, ResourceMapping

API = "storage.v1"
_IAM = "resource_storage_bucket.go expandIamConfiguration"

BUCKET = ResourceMapping(
    type="gcp:storage/bucket:Bucket",
    api=API,
    method="storage.buckets.insert",
    params={"project": "{project}"},
    source="resource_storage_bucket.go resourceStorageBucketCreate",
    fields={
        "project": Param("project"),
        "name": Field("name"),
        "location": Field("location"),
        "forceDestroy": NotSent("the provider deletes the objects first on destroy when it is true"),
        # expandIamConfiguration: both are fields of iamConfiguration.
        "uniformBucketLevelAccess": Field("iamConfiguration.uniformBucketLevelAccess.enabled", source=_IAM),
        "publicAccessPrevention": Field("iamConfiguration.publicAccessPrevention", source=_IAM),
        "hierarchicalNamespace.enabled": Field("hierarchicalNamespace.enabled"),
        "softDeletePolicy.retentionDurationSeconds": Field("softDeletePolicy.retentionDurationSeconds"),
    },
)

_BINDING = "bindings[0]"

BUCKET_IAM_MEMBER = ResourceMapping(
    type="gcp:storage/bucketIAMMember:BucketIAMMember",
    api=API,
    method="storage.buckets.setIamPolicy",
    params={"bucket": "{bucket}"},
    source="iam_storage_bucket.go StorageBucketIamUpdater.SetResourceIamPolicy (resource_iam_member.go "
           "resourceIamMemberCreate)",
    fields={
        "bucket": Param("bucket"),
        "role": Field(f"{_BINDING}.role"),
        # getResourceIamMember: the one member of the binding.
        "member": Field(f"{_BINDING}.members[0]", source="resource_iam_member.go getResourceIamMember"),
        "condition.title": Field(f"{_BINDING}.condition.title"),
        "condition.description": Field(f"{_BINDING}.condition.description"),
        "condition.expression": Field(f"{_BINDING}.condition.expression"),
    },
)

# resource_storage_bucket_object.go resourceStorageBucketObjectCreate: `storage.Object{Bucket: bucket}` with
# the content type, then `objectsService.Insert(bucket, object)`, `insertCall.Name(name)` (a query
# parameter of the upload) and `insertCall.Media(media)`: the file or `content` as the upload's media.
BUCKET_OBJECT = ResourceMapping(
    type="gcp:storage/bucketObject:BucketObject",
    api=API,
    method="storage.objects.insert",
    params={"bucket": "{bucket}", "name": "{name}"},
    source="resource_storage_bucket_object.go resourceStorageBucketObjectCreate",
    fields={
        "bucket": Param("bucket"),
        "name": Param("name", source="resource_storage_bucket_object.go: insertCall.Name(name)"),
        "contentType": Field("contentType"),
        "source": NotSent("the file's bytes are the upload's media (insertCall.Media), not a field"),
        "content": NotSent("the bytes are the upload's media (insertCall.Media), not a field"),
        "sourceMd5hash": NotSent("the provider's own trigger: a changed MD5 replaces the object"),
    },
)

# resource_storage_folder.go resourceStorageFolderCreate: POST `b/{bucket}/folders` (`storage.folders.insert`) with
# `{"name": name}`; the provider sends no `recursive`, so the parent must exist (components/bucket_folders.py).
FOLDER = ResourceMapping(
    type="gcp:storage/folder:Folder",
    api=API,
    method="storage.folders.insert",
    params={"bucket": "{bucket}"},
    source="resource_storage_folder.go resourceStorageFolderCreate",
    fields={
        "bucket": Param("bucket"),
        "name": Field("name"),
        "forceDestroy": NotSent("the provider deletes the folder's objects first on destroy when it is true"),
    },
)
