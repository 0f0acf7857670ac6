"""The stack's fine-tuning runs: one JobSet per run, from the pure builders of manifests/.

`pulumi up` submits each run and returns (`pulumi.com/skipAwait`); an
unchanged run is a no-op, and a changed run is replaced (deleted, then
created under the same name) because a JobSet's replicated jobs and policies
are immutable. The trainers resume from the checkpoints the old run left in
`checkpoints/<run>/`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from core.names import RUNS_NAMESPACE, TRAINER_KSA
from core.contract import SchedulingContract
from manifests import jobset
from manifests.run import PlatformFacts, build_run, check_runs, metadata
from stack.runs import RunConfig

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
    bucket: pulumi.Input[str]
    images: Mapping[str, pulumi.Input[str]]  # trainer -> image by digest
    provider: k8s.Provider
    # The JobSet Helm release (the CRD and webhook must exist first), and the
    # namespace, service account and Secret the pods use.
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    namespace: str = RUNS_NAMESPACE
    service_account: str = TRAINER_KSA


class Runs(pulumi.ComponentResource):
    """One `jobset.x-k8s.io/v1alpha2` JobSet per run of the stack."""

    jobsets: dict[str, k8s.apiextensions.CustomResource]

    def __init__(self, name: str, args: RunsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-finetune:workloads:Runs", name, None, opts)
        # Invalid runs are refused before any is declared (config validation reports them first).
        check_runs(list(args.runs), args.contracts, args.images)
        self.jobsets = {run.name: self._jobset(name, run, args) for run in args.runs}
        self.register_outputs(
            {"jobsets": {run: f"{args.namespace}/{run}" for run in self.jobsets}}
        )

    def _jobset(self, name: str, run: RunConfig, args: RunsArgs) -> k8s.apiextensions.CustomResource:
        contract = args.contracts[run.pool]
        # Output.all() of nothing is a list; runs that all name their own image pass no images.
        images = pulumi.Output.all(**args.images) if args.images else {}
        facts = pulumi.Output.all(bucket=args.bucket, images=images).apply(
            lambda v: PlatformFacts(v["bucket"], dict(v["images"]), args.namespace, args.service_account)
        )
        manifest = facts.apply(lambda f: build_run(run, contract, f))
        static = PlatformFacts("", {}, args.namespace, args.service_account)
        return k8s.apiextensions.CustomResource(
            f"{name}-{run.name}",
            api_version=jobset.API_VERSION,
            kind=jobset.KIND,
            # Known at preview even while the bucket or an image digest is not.
            metadata=metadata(run, contract, static),
            spec=manifest.apply(lambda m: m["spec"]),
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=args.provider,
                depends_on=args.depends_on,
                replace_on_changes=list(IMMUTABLE_PATHS),
                # Same name before and after: the old JobSet must go first.
                delete_before_replace=True,
            ),
        )
