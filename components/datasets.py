"""The stack's datasets, staged by `pulumi up`: one awaited Kubernetes Job each, and the identity it runs as.

The provider awaits a batch/v1 Job until its `Complete` condition is true
and fails `pulumi up` on `Failed` (pulumi_kubernetes batch/v1/Job.py, the
await logic in its docstring), within the resource's custom timeouts.

Unlike runs (submitted and left to run for hours), a staging Job is awaited:
the runs that read its dataset depend on it, so `pulumi up` orders them,
and a failed download fails `pulumi up` with the Job's error. The Job is
replaced when its dataset's source changes (a visible change in the
preview); its staging code copies nothing that is already there.
The `stager` service account's principal may write only below the stack's
datasets' `datasets/<stack>/<name>/` (an IAM condition each, as the trainer's
below its runs' prefixes), and read a `gcs:` source's bucket.
https://www.pulumi.com/registry/packages/kubernetes/api-docs/batch/v1/job/
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.runs import IMAGE_STAND_IN, _with_image
from components.storage import prefix_condition
from manifests.staging import DEADLINE_SECONDS, stack_staging_jobs
from stack.config import StackConfig


@dataclass
class DatasetStagingArgs:
    config: StackConfig
    provider: k8s.Provider
    images: Mapping[str, pulumi.Input[str]]  # trainer -> image by digest
    stager_member: pulumi.Input[str]
    # The namespace, the bucket, the cluster (its Workload Identity pool), the HF Secret if any.
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    # False: the stager's grants on the buckets are the platform team's (an existing cluster's default).
    grants: bool = True


class DatasetStaging(pulumi.ComponentResource):
    """`jobs` holds the staging Job of each dataset, by name; runs depend on them."""

    jobs: dict[str, k8s.batch.v1.Job]

    def __init__(self, name: str, args: DatasetStagingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-finetune:platform:DatasetStaging", name, None, opts)
        cfg = args.config
        self.jobs = {}
        if not any(d.staged_in_cluster for d in cfg.datasets):  # a `path` is uploaded (components/uploads.py)
            self.register_outputs({})
            return
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.depends_on)
        account = k8s.core.v1.ServiceAccount(
            f"{name}-ksa", metadata={"name": cfg.stager_account, "namespace": cfg.runs_namespace}, opts=k8s_opts
        )
        grants = self._grants(name, args) if args.grants else []
        ready = pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[account, *grants]))
        # Images still being built stand in until their digest is known (as in the runs' specs).
        known = {t: i if isinstance(i, str) else IMAGE_STAND_IN for t, i in args.images.items()}
        manifests = stack_staging_jobs(cfg, known)
        for dataset in (d for d in cfg.datasets if d.staged_in_cluster):
            image, manifest = args.images[cfg.staging_trainer(dataset)], manifests[dataset.name]
            spec = manifest["spec"] if isinstance(image, str) else _with_image(manifest["spec"], image)
            self.jobs[dataset.name] = k8s.batch.v1.Job(
                f"{name}-{dataset.name}",
                metadata=manifest["metadata"],
                spec=spec,
                opts=pulumi.ResourceOptions.merge(ready, pulumi.ResourceOptions(
                    # A Job's pod template is immutable: a changed source is a new Job.
                    replace_on_changes=["spec"],
                    delete_before_replace=True,
                    custom_timeouts=pulumi.CustomTimeouts(create=f"{DEADLINE_SECONDS}s", update=f"{DEADLINE_SECONDS}s"),
                )),
            )
        self.register_outputs({"jobs": {n: f"{cfg.runs_namespace}/stage-{n}" for n in self.jobs}})

    def _grants(self, name: str, args: DatasetStagingArgs) -> list[gcp.storage.BucketIAMMember]:
        cfg, child = args.config, pulumi.ResourceOptions(parent=self, depends_on=args.depends_on)
        # Read the bucket; write, per dataset, only below datasets/<stack>/<name>/ (the staging Job's mount), so
        # a second stack sharing the bucket writes none of this stack's datasets.
        layout = cfg.bucket_layout
        grants = [gcp.storage.BucketIAMMember(f"{name}-read", bucket=cfg.data_bucket, role="roles/storage.objectViewer",
                                              member=args.stager_member, opts=child)]
        grants += [
            gcp.storage.BucketIAMMember(
                f"{name}-write-{d.name}", bucket=cfg.data_bucket, role="roles/storage.objectUser",
                member=args.stager_member,
                condition=gcp.storage.BucketIAMMemberConditionArgs(
                    title=f"dataset-{d.name}-only", description=f"Write only below {layout.dataset(d.name)}/",
                    expression=prefix_condition(cfg.data_bucket, [layout.dataset(d.name)])),
                opts=child,
            )
            for d in cfg.datasets
        ]
        for bucket in sorted({d.gcs_bucket for d in cfg.datasets if d.gcs_bucket}):
            grants.append(gcp.storage.BucketIAMMember(
                f"{name}-source-{bucket}", bucket=bucket, role="roles/storage.objectViewer",
                member=args.stager_member, opts=child))
        return grants
