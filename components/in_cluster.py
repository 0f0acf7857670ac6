"""What lives in the cluster, whichever way the stack gets one: the runs' workspace, the controllers, the
queues, the staging Jobs and the runs. `Footing` is what they stand on: the stack's own cluster
(`__main__.py`) or an existing one (components/existing_cluster.py). Plain wiring of the components
below, so the resources keep their names and parents whichever way the cluster comes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from admission.namespace_needs import needed_level
from admission.shared_cluster import owner_values
from components.compute_classes import ComputeClasses, ComputeClassesArgs
from components.datasets import DatasetStaging, DatasetStagingArgs
from components.jobset import JobSetController, JobSetControllerArgs
from components.kueue import Kueue, KueueArgs
from components.runs import RUNS_NAME, Runs, RunsArgs
from components.serving import ModelServer, ModelServerArgs
from components.token_access import TokenAccess, TokenAccessArgs
from components.uploads import DatasetUploads, DatasetUploadsArgs
from components.workspace import RunsWorkspace, RunsWorkspaceArgs
from manifests.ladder import controller_manifests
from stack.config import StackConfig
from stack.secrets import datasets_needing_hf_token, runs_needing_hf_token
from stack.places import stack_run_links


@dataclass
class Footing:
    """What the in-cluster parts stand on, from either way to a cluster."""

    provider: k8s.Provider
    images: dict  # trainer -> image by digest (an Output while being built)
    contracts: dict  # pool -> SchedulingContract
    stager_member: pulumi.Input[str] | None
    trainer_member: pulumi.Input[str] | None = None
    # What the controllers wait for (nodes to run on), what every in-cluster object waits for
    # (the cluster), what pods wait for (the bucket, the trainer's grants on it and the folders of the stack's
    # prefixes: a run is deleted, and its pods' SIGTERM checkpoint written, before `destroy` revokes the grants).
    controller_nodes: list = field(default_factory=list)
    cluster: list = field(default_factory=list)
    bucket: list = field(default_factory=list)
    opts: pulumi.ResourceOptions | None = None  # after the APIs, on the stack's own cluster
    install_controllers: bool = True
    staging_grants: bool = True  # the stack declares its Google Cloud grants (an existing cluster's: bucketGrants)
    # The model server's principal, for its read grant on the export; None: no grant declared (the platform team's).
    server_member: pulumi.Input[str] | None = None


def in_cluster(cfg: StackConfig, at: Footing) -> None:
    """The runs' workspace, the controllers, the queues, the staging Jobs and the runs."""
    workspace = RunsWorkspace("runs-workspace", RunsWorkspaceArgs(
        provider=at.provider, namespace=cfg.runs_namespace, stack=cfg.stack, service_account=cfg.trainer_account,
        create_namespace=cfg.creates_namespace, hf_token_version=cfg.hf_token_version if cfg.reads_hub else None,
        depends_on=at.cluster, pod_security=needed_level(cfg)), at.opts)
    token_grants = token_access(cfg, at)
    controllers = []
    if at.install_controllers:
        jobset = JobSetController("jobset", JobSetControllerArgs(
            provider=at.provider, depends_on=at.controller_nodes, charts=cfg.charts,
            values=owner_values("jobset", cfg.runs_namespace, cfg.stack)))
        controllers = [jobset.release]

    # Kueue, only for a stack whose runs need it (a queued pool, a ladder, a priority).
    queue_ready = []
    if cfg.kueue_flavors():
        kueue = Kueue("kueue", KueueArgs(
            flavors=cfg.kueue_flavors(), provider=at.provider, namespace=cfg.runs_namespace,
            owner=owner_values("kueue", cfg.runs_namespace, cfg.stack),
            depends_on=controllers,
            namespace_dependencies=workspace.namespaced, charts=cfg.charts, install=at.install_controllers,
            settings=cfg.kueue, ladder=controller_manifests(cfg)))
        queue_ready = kueue.ready

    # Autopilot: one ComputeClass per capacity ladder, which the ladder's run selects.
    if cfg.compute_classes():
        compute_classes = ComputeClasses("compute-classes", ComputeClassesArgs(
            classes=cfg.compute_classes(), provider=at.provider, depends_on=at.cluster,
            renamed=cfg.compute_class_renames()))
        queue_ready = [*queue_ready, *compute_classes.ready]

    pulumi.export("pools", {
        name: {"nodePools": list(c.node_pool_names), "nodeSelector": c.node_selector, "chips": c.total_chips}
        for name, c in at.contracts.items()})

    # Datasets: staged into the bucket by awaited in-cluster Jobs, before the runs that read them.
    staging = DatasetStaging("datasets", DatasetStagingArgs(
        config=cfg, provider=at.provider, images=at.images, stager_member=at.stager_member,
        depends_on=[*at.cluster, *at.bucket, *workspace.pod_dependencies, *token_grants], grants=at.staging_grants),
        at.opts)

    # Datasets from the machine running `pulumi up` (`path`): uploaded by it, before the runs.
    local = [d for d in cfg.datasets if not d.staged_in_cluster]
    uploads = DatasetUploads("uploads", DatasetUploadsArgs(
        bucket=cfg.data_bucket, datasets=local, layout=cfg.bucket_layout, depends_on=at.bucket),
        at.opts).all if local else []

    runs = Runs(RUNS_NAME, RunsArgs(
        runs=cfg.runs, contracts=at.contracts, bucket=cfg.data_bucket, images=at.images, provider=at.provider,
        namespace=cfg.runs_namespace, service_account=cfg.trainer_account, data_paths=cfg.data_paths(),
        mix_paths=cfg.mix_paths(), layout=cfg.bucket_layout, exports=cfg.export_prefixes(),
        depends_on=[*controllers, *at.bucket, *workspace.pod_dependencies, *token_grants, *staging.jobs.values(),
                    *queue_ready, *uploads]))
    pulumi.export("runs", sorted(runs.jobsets))
    # Each run's workload page and Cloud Logging query in the console (`make status` prints them too).
    pulumi.export("runLinks", stack_run_links(cfg))
    # Where each run with `export:` writes its model (`make download` brings it to this machine).
    pulumi.export("exports", {run: f"gs://{cfg.data_bucket}/{prefix}/" for run, prefix in cfg.export_prefixes().items()})
    pulumi.export("datasets", {name: f"gs://{cfg.data_bucket}/{cfg.bucket_layout.dataset(name)}/"
                               for name in [*staging.jobs, *(d.name for d in local)]})

    # `serve:`: a vLLM server of one run's export, after the runs (`make chat` talks to it).
    if cfg.serve is not None:
        server = ModelServer("serve", ModelServerArgs(
            config=cfg, provider=at.provider, server_member=at.server_member,
            depends_on=[*at.cluster, *at.bucket, *workspace.namespaced], runs=list(runs.jobsets.values())), at.opts)
        pulumi.export("serve", {"service": f"{cfg.runs_namespace}/{server.service_name}", "model": cfg.serve.run,
                                "pool": cfg.serve.pool})


def token_access(cfg: StackConfig, at: Footing) -> list[pulumi.Resource]:
    """The grants that let the pods reading the Hub read the token's secret, where the stack declares its
    grants; an existing cluster's platform team grants them otherwise (docs/existing-clusters.md)."""
    readers = {}
    if runs_needing_hf_token(cfg.runs) and at.trainer_member is not None:
        readers["trainer"] = at.trainer_member
    if datasets_needing_hf_token(cfg.datasets) and at.stager_member is not None:
        readers["stager"] = at.stager_member
    if not readers or not at.staging_grants:
        return []
    return TokenAccess("hf-token", TokenAccessArgs(secret=cfg.hf_token_secret_name, readers=readers), at.opts).grants
