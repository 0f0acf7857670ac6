"""Datasets from the machine running `pulumi up` (`path:`): each file uploaded to its dataset's prefix.

One Cloud Storage object per file, `datasets/<stack>/<name>/<file>` (a folder keeps its layout), from a
Pulumi FileAsset, with the file's MD5 as `sourceMd5hash`: the engine hashes the asset and the
provider replaces an object whose MD5 changed, so a second `pulumi up` uploads nothing unchanged
and a changed file is uploaded again, visibly in the preview
(https://www.pulumi.com/registry/packages/gcp/api-docs/storage/bucketobject/, `sourceMd5hash`).
Replacing an object of the same name deletes the old one first: created first, the new object
would be the one the deletion removes. After each upload the MD5 Cloud Storage computed for the
object must be the file's, or `pulumi up` fails naming the file. `.staged.json` beside the files
records the source and each file's size and SHA-256, as the staging Jobs write it for the other
sources (trainers/staging/stage.py), and the runs reading the dataset wait for the uploads.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_gcp as gcp

from core.names import BucketLayout
from stack.datasets import DatasetConfig

MANIFEST = ".staged.json"  # trainers/staging/stage.py MANIFEST


@dataclass(frozen=True)
class LocalFile:
    name: str  # below the dataset's prefix
    path: Path
    size: int
    md5: str  # base64, as Cloud Storage reports an object's md5Hash
    sha256: str  # hex, as the staging's manifest records it


def local_file(name: str, path: Path) -> LocalFile:
    md5, sha256, size = hashlib.md5(usedforsecurity=False), hashlib.sha256(), 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            md5.update(chunk)
            sha256.update(chunk)
            size += len(chunk)
    return LocalFile(name, path, size, base64.b64encode(md5.digest()).decode(), sha256.hexdigest())


def manifest(dataset: DatasetConfig, files: list[LocalFile]) -> str:
    """The dataset's `.staged.json`, as the staging Jobs write it."""
    record = {"source": {"kind": "path", "path": dataset.path}, "resolved": None,
              "files": [{"name": f.name, "size": f.size, "sha256": f.sha256} for f in files]}
    return json.dumps(record, indent=2, sort_keys=True)


def check_upload(file: LocalFile, uploaded: str | None) -> str | None:
    """The MD5 Cloud Storage computed for the object, which must be the file's (unknown in a preview)."""
    if uploaded is not None and uploaded != file.md5:
        raise ValueError(f"{file.path}: uploaded as .../{file.name} with MD5 {uploaded}, but the file's is "
                         f"{file.md5}; the upload was corrupted or the file changed during it: run `pulumi up` again")
    return uploaded


@dataclass
class DatasetUploadsArgs:
    bucket: str
    datasets: list[DatasetConfig]  # those with `path`
    layout: BucketLayout  # where each dataset's prefix is (StackConfig.bucket_layout)
    depends_on: list[pulumi.Resource]  # the bucket


class DatasetUploads(pulumi.ComponentResource):
    """`objects` holds every uploaded object (the runs depend on them), by dataset."""

    objects: dict[str, list[gcp.storage.BucketObject]]

    def __init__(self, name: str, args: DatasetUploadsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-finetune:platform:DatasetUploads", name, None, opts)
        self.objects, verified = {}, {}
        # retain_on_delete: `pulumi destroy` (or a dataset taken out of the stack) leaves the uploaded
        # objects in the bucket, which outlives the stack, as it leaves the datasets the staging Jobs wrote;
        # a changed file still replaces its object (the new upload overwrites the name).
        # https://www.pulumi.com/docs/iac/concepts/options/retainondelete/
        child = pulumi.ResourceOptions(parent=self, depends_on=args.depends_on, delete_before_replace=True,
                                       retain_on_delete=True)
        for dataset in args.datasets:
            files = [local_file(n, p) for n, p in dataset.local_files()]
            prefix = args.layout.dataset(dataset.name)
            objects = []
            for f in files:
                obj = gcp.storage.BucketObject(
                    f"{name}-{dataset.name}-{f.name}", bucket=args.bucket, name=f"{prefix}/{f.name}",
                    source=pulumi.FileAsset(str(f.path)), source_md5hash=f.md5, opts=child)
                # Awaited with the component's outputs: a mismatch fails `pulumi up`.
                verified[f"{prefix}/{f.name}"] = obj.md5hash.apply(lambda uploaded, f=f: check_upload(f, uploaded))
                objects.append(obj)
            objects.append(gcp.storage.BucketObject(
                f"{name}-{dataset.name}-{MANIFEST}", bucket=args.bucket, name=f"{prefix}/{MANIFEST}",
                content=manifest(dataset, files), content_type="application/json",
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=objects))))
            self.objects[dataset.name] = objects
        self.register_outputs({"md5": verified})

    @property
    def all(self) -> list[gcp.storage.BucketObject]:
        return [o for objects in self.objects.values() for o in objects]
