"""The stack's fine-tuning runs: one JobSet per run, from the pure builders of manifests/.

`pulumi up` submits each run and returns (`pulumi.com/skipAwait`); an
unchanged run is a no-op, and a changed run is replaced (deleted, then
created under the same name) because a JobSet's replicated jobs and policies
are immutable. The trainers resume from the checkpoints the old run left in
`checkpoints/<stack>/<run>/`.

A JobSet's spec is plain data but for its trainer's image (an Output while
the image is being built), so `pulumi preview` shows every field and which
change replaces the run, and a run changes only with its own trainer's image.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from core.contract import SchedulingContract
from core.names import BucketLayout
from manifests import jobset, pod
from manifests.run import PlatformFacts, build_run, metadata
from stack.queueing import run_contract, withdrawn
from stack.runs import RunConfig

# Where a run's image goes while the manifest is built; a valid digest
# reference that no registry serves, replaced by the image Output.
IMAGE_STAND_IN = "image.invalid/unresolved@sha256:" + "0" * 64

# JobSet fields the API server refuses to change (CEL `self == oldSelf` in the
# v0.12.0 CRD, or the webhook): a change to any of them is a replacement.
# `spec.suspend` stays updatable in place.
IMMUTABLE_PATHS = (
    "spec.replicatedJobs",
    "spec.failurePolicy",
    "spec.successPolicy",
    "spec.startupPolicy",
    "spec.network",
)


@dataclass
class RunsArgs:
    runs: Sequence[RunConfig]
    contracts: Mapping[str, SchedulingContract]
    bucket: str  # the data bucket's name (known before it exists: stack/config.py derives it)
    images: Mapping[str, pulumi.Input[str]]  # trainer -> image by digest (an Output while being built)
    provider: k8s.Provider
    namespace: str  # the stack's (StackConfig.runs_namespace)
    service_account: str  # the stack's trainer account
    # The JobSet Helm release (the CRD and webhook must exist first), the namespace, service account and
    # Hugging Face token's SecretProviderClass the pods use, and the trainer's bucket grants (so `destroy` deletes a run, and waits for its
    # pods' SIGTERM checkpoint, before it revokes the grants the checkpoint is written with).
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    # run -> the path below the stack's datasets/<stack>/ it reads (StackConfig.data_paths).
    data_paths: Mapping[str, str] = field(default_factory=dict)
    mix_paths: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # StackConfig.mix_paths
    # Where each run's prefixes are in the bucket (StackConfig.bucket_layout).
    layout: BucketLayout | None = None
    # run -> its export prefix (StackConfig.export_prefixes).
    exports: Mapping[str, str] = field(default_factory=dict)


RUNS_TYPE = "gke-finetune:workloads:Runs"
RUNS_NAME = "runs"  # the one Runs component of a stack (components/in_cluster.py)


def jobset_urn(stack: str, project: str, run: str) -> str:
    """The URN of a run's JobSet: `urn:pulumi:<stack>::<project>::<parent type>$<type>::<name>`
    (https://www.pulumi.com/docs/iac/concepts/resources/names/#urns), for `pulumi up --target`."""
    return (f"urn:pulumi:{stack}::{project}::{RUNS_TYPE}$kubernetes:{jobset.API_VERSION}:{jobset.KIND}"
            f"::{RUNS_NAME}-{run}")


class Runs(pulumi.ComponentResource):
    """One `jobset.x-k8s.io/v1alpha2` JobSet per run of the stack."""

    jobsets: dict[str, k8s.apiextensions.CustomResource]

    def __init__(self, name: str, args: RunsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(RUNS_TYPE, name, None, opts)
        # The runs come validated from the stack's reader, and `images` holds each trainer's image the runs
        # use (components/images.py `trainer_images`: pinned, or built), so nothing is checked again here.
        # A suspended run Kueue admits is not declared at all (stack/queueing.py `withdrawn`).
        self.jobsets = {run.name: self._jobset(name, run, args) for run in args.runs
                        if not withdrawn(run, args.contracts)}
        self.register_outputs(
            {"jobsets": {run: f"{args.namespace}/{run}" for run in self.jobsets}}
        )

    def _jobset(self, name: str, run: RunConfig, args: RunsArgs) -> k8s.apiextensions.CustomResource:
        # Its pool's contract, or on Autopilot its ladder's ComputeClass's (stack/queueing.py).
        contract = run_contract(run, args.contracts)
        return k8s.apiextensions.CustomResource(
            f"{name}-{run.name}",
            api_version=jobset.API_VERSION,
            kind=jobset.KIND,
            metadata=metadata(run, contract, PlatformFacts("", {}, args.namespace, args.service_account)),
            spec=run_spec(run, contract, args),
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=args.provider,
                depends_on=args.depends_on,
                custom_timeouts=pulumi.CustomTimeouts(delete=f"{delete_timeout_seconds(run, contract)}s"),
                replace_on_changes=list(IMMUTABLE_PATHS),
                # Same name before and after: the old JobSet must go first.
                delete_before_replace=True,
                # Kueue unsuspends a run it admits (and suspends one it evicts): not Pulumi's to revert.
                ignore_changes=["spec.suspend"] if contract.queue else None,
            ),
        )


# A JobSet's delete waits for its pods to end (the provider deletes in the foreground), and a pod ends
# when its trainer has saved its SIGTERM checkpoint or its grace period (core/trainers.py
# `grace_seconds`) is over. The provider's default delete timeout, 10 minutes, equals the GPU trainer's
# grace period: a slow save would fail `destroy` (or a replace) while the pod still writes. The grace
# period plus this margin leaves the save its whole grace period, and the API server and kubelet time to
# notice the pod's end.
# https://www.pulumi.com/docs/iac/concepts/options/customtimeouts/
DELETE_MARGIN_SECONDS = 300


def delete_timeout_seconds(run: RunConfig, contract: SchedulingContract) -> int:
    return pod.grace_seconds(run.row_on(contract.family)) + DELETE_MARGIN_SECONDS


def run_spec(run: RunConfig, contract: SchedulingContract, args: RunsArgs) -> dict:
    """The run's JobSet spec as plain data, with its trainer's image as the only Output in it.

    At preview an image still to be built has no digest yet; everything else
    of the spec is known, so `pulumi preview` shows the fields that change and
    marks a replacement where `replaceOnChanges` applies, and a run depends on
    its own trainer's image only.
    """
    image = run.image or args.images[run.trainer]  # one's own container: its image, by digest
    known = image if isinstance(image, str) else IMAGE_STAND_IN
    facts = PlatformFacts(args.bucket, {run.trainer or "": known}, args.namespace, args.service_account,
                          data_paths=args.data_paths, mix_paths=args.mix_paths, layout=args.layout,
                          exports=args.exports)
    spec = build_run(run, contract, facts)["spec"]
    return spec if isinstance(image, str) else _with_image(spec, image)


def _with_image(value: Any, image: pulumi.Output[str]) -> Any:
    """`value` with the stand-in image replaced by the image Output, wherever it appears."""
    if isinstance(value, dict):
        return {k: _with_image(v, image) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_image(v, image) for v in value]
    return image if value == IMAGE_STAND_IN else value
