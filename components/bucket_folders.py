"""The folders of a stack's prefixes in a bucket with hierarchical namespace, declared with the grants.

On such a bucket folders are resources of their own: each `/` of an object name is a folder
(https://cloud.google.com/storage/docs/folders-overview), and Cloud Storage FUSE makes them as a file system
makes directories: "Commands like mkdir now directly create folder resources within the bucket"
(GoogleCloudPlatform/gcsfuse docs/semantics.md, "Using Cloud Storage Buckets with Hierarchical Namespaces
Enabled"; it needs no `implicit-dirs` there). Its mkdir is a Storage Control CreateFolder with `Recursive:
true` (internal/fs/inode/dir.go `CreateChildDir`, internal/storage/bucket_handle.go `CreateFolder`; below an
`only-dir` mount the name is prefixed, internal/gcsx/prefix_bucket.go), so it makes every missing parent of
the folder too. Creating one takes `storage.folders.create` on its name
(https://cloud.google.com/storage/docs/json_api/v1/folders/insert; roles/storage.objectUser holds it:
https://cloud.google.com/storage/docs/create-folders), and a run's or staging Job's grant covers only names
below its own prefixes (components/storage.py `prefix_condition`): a trainer's first checkpoint directory in a
fresh bucket would ask for `checkpoints/` and `checkpoints/<stack>/` as well, which its grant refuses. The program declares every folder of the stack's
layout (core/names.py `BucketLayout.folders`), each after its parent: folders.insert makes no missing parent
unless asked (`recursive`), and the provider does not ask (terraform-provider-google-beta
resource_storage_folder.go resourceStorageFolderCreate: POST b/{bucket}/folders with the name only).

A folder that exists already (another stack's `checkpoints/`, or one a run's writes made) is adopted with the
`import` option, found at preview (components/bucket_preflight.py), so nothing is created twice (a 409); the
engine treats a resource already in the state with the same import ID as any other
(pulumi/pulumi developer-docs/architecture/import.md). None is ever deleted: `retain_on_delete`, as the bucket
itself, since a folder holds what the runs wrote and may be another stack's parent too.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import pulumi
import pulumi_gcp as gcp


def parent_of(folder: str) -> str:
    """`checkpoints/dev/` -> `checkpoints/`; a top folder's parent is the bucket's root ('')."""
    head = folder.rstrip("/").rpartition("/")[0]
    return f"{head}/" if head else ""


def declare_folders(name: str, bucket: pulumi.Input[str], bucket_name: str, folders: Sequence[str],
                    existing: Collection[str], opts: pulumi.ResourceOptions) -> list[gcp.storage.Folder]:
    """One Folder per name of `folders` (parents first), after its parent; those in `existing` adopted."""
    declared: dict[str, gcp.storage.Folder] = {}
    for folder in folders:
        parent = declared.get(parent_of(folder))
        declared[folder] = gcp.storage.Folder(
            f"{name}-folder-{folder}",
            bucket=bucket,
            name=folder,
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
                depends_on=[parent] if parent else [],
                retain_on_delete=True,
                # The provider's import ID: `{{bucket}}/{{name}}` (resource_storage_folder.go).
                import_=f"{bucket_name}/{folder}" if folder in existing else None,
            )),
        )
    return list(declared.values())
