"""The data bucket: datasets in, checkpoints and profiles out. It outlives the stack.

Layout (core/names.py): `datasets/<stack>/` (read by the stack's runs), `checkpoints/<stack>/<run>/`
and `profiles/<stack>/<run>/` (written by the run). The stack's trainer principal reads
the whole bucket (resuming reads checkpoints back; GCS FUSE lists the bucket)
and may write only below its own runs' checkpoints and profiles prefixes: one IAM
condition per run on the object (and, with hierarchical namespace, folder) resource
name, so a second stack whose runs share the bucket (an existing cluster's,
`bucketName`), even one with runs of the same names, can write nothing of
this stack's, nor this stack anything of its. Reads stay bucket-wide: a stack
that must not be read by another has a bucket of its own (the default).
https://cloud.google.com/storage/docs/access-control/iam#conditions
Managed folders would do the same but are resources inside the bucket that
`pulumi destroy` would have to delete; conditions leave the bucket's content
alone.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

from components.bucket_folders import declare_folders
from core.names import BucketLayout

SOFT_DELETE_SECONDS = 7 * 24 * 3600


@dataclass
class DataBucketArgs:
    project: str
    location: str
    name: str
    trainer_member: pulumi.Input[str]
    runs: Sequence[str]  # the stack's runs, each writing below its own prefixes
    layout: BucketLayout  # where each run's prefixes are (StackConfig.bucket_layout)
    datasets: Sequence[str] = ()  # the stack's datasets, each in a folder of its own
    existing_folders: Collection[str] = ()  # folders found in the bucket at preview (components/bucket_preflight.py)
    # run -> its export prefix (StackConfig.export_prefixes), which it writes too.
    exports: Mapping[str, str] = field(default_factory=dict)
    # The grants name a principal of the cluster's Workload Identity pool,
    # which exists once the cluster does.
    grants_depend_on: list[pulumi.Resource] = field(default_factory=list)


def run_writes(layout: BucketLayout, run: str, exports: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """What a run writes (manifests/storage.py mounts them): its checkpoints and profiles, and its export
    where it has `export:`."""
    return (*layout.run(run).writes, *((exports[run],) if run in (exports or {}) else ()))


def prefix_condition(bucket: str, prefixes: Sequence[str]) -> str:
    """CEL expression true only for objects and folders below `prefixes` (each without a trailing '/')."""
    clauses = [
        f'resource.name.startsWith("projects/_/buckets/{bucket}/{kind}/{prefix}/")'
        for prefix in prefixes
        for kind in ("objects", "folders")
    ]
    return " || ".join(clauses)


def export_read_condition(bucket: str, prefix: str) -> str:
    """CEL expression of a model server's read grant: the export's objects and folders, and the bucket itself.

    The bucket clause is for listing, which IAM checks against the bucket, not an object: the Cloud Storage
    FUSE CSI driver's node check and its sidecar's both call GetStorageLayout with no prefix before mounting,
    and that call needs `storage.objects.list` on the bucket (gcs-fuse-csi-driver
    pkg/cloud_provider/storage/storage.go `CheckBucketExists`; storage v1 discovery document,
    `buckets.getStorageLayout`: "requires storage.objects.list permission", its `prefix` narrows the check only
    when given). So the server may list the bucket's object names, and read only the export's objects
    (`storage.objects.get` is checked against each object's name).
    https://cloud.google.com/storage/docs/access-control/iam#conditions
    """
    return f'resource.type == "storage.googleapis.com/Bucket" || {prefix_condition(bucket, [prefix])}'


class DataBucket(pulumi.ComponentResource):
    """The bucket (protected, kept on destroy) and the trainer's grants on it."""

    bucket: gcp.storage.Bucket
    url: pulumi.Output[str]
    grants: list[gcp.storage.BucketIAMMember]  # what the runs write with: they wait for it, destroy revokes it last
    folders: list[gcp.storage.Folder]  # the folders of the stack's prefixes: the runs and staging Jobs wait for them

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
        self.grants = trainer_grants(name, self.bucket.name, args.name, args.trainer_member, args.runs, args.layout,
                                     child, args.exports)
        # Hierarchical namespace: the folders of the stack's prefixes, so that gcsfuse makes none outside a grant.
        self.folders = declare_folders(name, self.bucket.name, args.name,
                                       args.layout.folders(args.runs, args.datasets, sorted(args.exports)),
                                       args.existing_folders, pulumi.ResourceOptions(parent=self))
        self.url = pulumi.Output.concat("gs://", self.bucket.name)
        self.register_outputs({"url": self.url})


def trainer_grants(name: str, bucket: pulumi.Input[str], bucket_name: str, member: pulumi.Input[str],
                   runs: Sequence[str], layout: BucketLayout,
                   opts: pulumi.ResourceOptions, exports: Mapping[str, str] | None = None) -> list[gcp.storage.BucketIAMMember]:
    """The trainer's grants: read the whole bucket; write, per run, only below that run's prefixes (the ones
    manifests/storage.py mounts: a legacy run's where it was deployed), its export's too where it has one.

    One binding per run keeps each condition small (IAM caps a condition's logical operators) and a new
    run's grant a new binding, which leaves the running runs' grants alone."""
    grants = [gcp.storage.BucketIAMMember(
        f"{name}-trainer-read", bucket=bucket, role="roles/storage.objectViewer", member=member, opts=opts,
    )]
    for run in runs:
        grants.append(gcp.storage.BucketIAMMember(
            f"{name}-trainer-write-{run}",
            bucket=bucket,
            role="roles/storage.objectUser",
            member=member,
            condition=gcp.storage.BucketIAMMemberConditionArgs(
                title=f"run-{run}-only",
                description=f"Write only below the prefixes of run {run}",
                expression=prefix_condition(bucket_name, run_writes(layout, run, exports)),
            ),
            opts=opts,
        ))
    return grants


@dataclass
class BucketGrantsArgs:
    bucket: str  # an existing bucket's name
    trainer_member: pulumi.Input[str]
    runs: Sequence[str]  # the stack's runs
    layout: BucketLayout
    datasets: Sequence[str] = ()
    # The bucket's folders, where it has hierarchical namespace (read at preview; None: not known, none declared).
    existing_folders: Collection[str] | None = None
    exports: Mapping[str, str] = field(default_factory=dict)  # run -> its export prefix


class BucketGrants(pulumi.ComponentResource):
    """The trainer's grants on a bucket the stack doesn't declare (an existing cluster's, `bucketGrants: true`), and
    the folders of the stack's prefixes where it has hierarchical namespace."""

    grants: list[gcp.storage.BucketIAMMember]
    folders: list[gcp.storage.Folder]

    def __init__(self, name: str, args: BucketGrantsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-finetune:platform:BucketGrants", name, None, opts)
        self.grants = trainer_grants(name, args.bucket, args.bucket, args.trainer_member, args.runs, args.layout,
                                     pulumi.ResourceOptions(parent=self), args.exports)
        self.folders = [] if args.existing_folders is None else declare_folders(
            name, args.bucket, args.bucket, args.layout.folders(args.runs, args.datasets, sorted(args.exports)),
            args.existing_folders, pulumi.ResourceOptions(parent=self))
        self.url = f"gs://{args.bucket}"
        self.register_outputs({"url": self.url})
