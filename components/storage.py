"""The data bucket: datasets in, checkpoints and profiles out. It outlives the stack.

Layout (core/names.py): `datasets/` (read by every run), `checkpoints/<run>/`
and `profiles/<run>/` (written by the run). The trainer account reads the
whole bucket (resuming reads checkpoints back; GCS FUSE needs object list)
and may write only under `checkpoints/` and `profiles/`: an IAM condition on
the object (and, with hierarchical namespace, folder) resource name.
https://cloud.google.com/storage/docs/access-control/iam#conditions
Managed folders would do the same but are resources inside the bucket that
`pulumi destroy` would have to delete; conditions leave the bucket's content
alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

from core.names import CHECKPOINT_PREFIX, PROFILE_PREFIX

SOFT_DELETE_SECONDS = 7 * 24 * 3600
WRITABLE_PREFIXES = (CHECKPOINT_PREFIX, PROFILE_PREFIX)


@dataclass
class DataBucketArgs:
    project: str
    location: str
    name: str
    trainer_member: pulumi.Input[str]
    # The grants name a principal of the cluster's Workload Identity pool,
    # which exists once the cluster does.
    grants_depend_on: list[pulumi.Resource] = field(default_factory=list)


def write_condition(bucket: str) -> str:
    """CEL expression true only for objects and folders below the writable prefixes."""
    clauses = [
        f'resource.name.startsWith("projects/_/buckets/{bucket}/{kind}/{prefix}/")'
        for prefix in WRITABLE_PREFIXES
        for kind in ("objects", "folders")
    ]
    return " || ".join(clauses)


class DataBucket(pulumi.ComponentResource):
    """The bucket (protected, kept on destroy) and the trainer's grants on it."""

    bucket: gcp.storage.Bucket
    url: pulumi.Output[str]

    def __init__(self, name: str, args: DataBucketArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-finetune:platform:DataBucket", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=args.grants_depend_on)
        self.bucket = gcp.storage.Bucket(
            name,
            project=args.project,
            name=args.name,
            location=args.location.upper(),
            # Hierarchical namespace (fast folder renames and listing for GCS FUSE)
            # requires uniform bucket-level access.
            # https://cloud.google.com/storage/docs/hns-overview
            uniform_bucket_level_access=True,
            hierarchical_namespace=gcp.storage.BucketHierarchicalNamespaceArgs(enabled=True),
            public_access_prevention="enforced",
            soft_delete_policy=gcp.storage.BucketSoftDeletePolicyArgs(
                retention_duration_seconds=SOFT_DELETE_SECONDS
            ),
            force_destroy=False,
            # `pulumi destroy --exclude-protected` (make destroy) leaves it in
            # place; retain_on_delete keeps it even if it is ever unprotected.
            opts=pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=True),
        )
        trainer_grants(name, self.bucket.name, args.name, args.trainer_member, child)
        self.url = pulumi.Output.concat("gs://", self.bucket.name)
        self.register_outputs({"url": self.url})


def trainer_grants(name: str, bucket: pulumi.Input[str], bucket_name: str, member: pulumi.Input[str],
                   opts: pulumi.ResourceOptions) -> list[gcp.storage.BucketIAMMember]:
    """The trainer's grants: read the whole bucket, write only below checkpoints/ and profiles/."""
    return [
        gcp.storage.BucketIAMMember(
            f"{name}-trainer-read", bucket=bucket, role="roles/storage.objectViewer", member=member, opts=opts,
        ),
        gcp.storage.BucketIAMMember(
            f"{name}-trainer-write",
            bucket=bucket,
            role="roles/storage.objectUser",
            member=member,
            condition=gcp.storage.BucketIAMMemberConditionArgs(
                title="checkpoints-and-profiles-only",
                description="Write only below checkpoints/ and profiles/",
                expression=write_condition(bucket_name),
            ),
            opts=opts,
        ),
    ]


@dataclass
class BucketGrantsArgs:
    bucket: str  # an existing bucket's name
    trainer_member: pulumi.Input[str]


class BucketGrants(pulumi.ComponentResource):
    """The trainer's grants on a bucket the stack doesn't declare (an existing cluster's, `bucketGrants: true`)."""

    def __init__(self, name: str, args: BucketGrantsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-finetune:platform:BucketGrants", name, None, opts)
        trainer_grants(name, args.bucket, args.bucket, args.trainer_member, pulumi.ResourceOptions(parent=self))
        self.url = f"gs://{args.bucket}"
        self.register_outputs({"url": self.url})
