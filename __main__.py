"""gke-finetune: wires the platform components for the selected stack.

Config is read and validated first; nothing is declared if it is invalid.
"""

import pulumi

from infra import config as stack_config
from infra.cluster import Cluster, ClusterArgs
from infra.identity import Identity, IdentityArgs, member_of
from infra.jobset import JobSetController, JobSetControllerArgs
from infra.kube import KubernetesAccess, KubernetesAccessArgs
from infra.node_pools import NodePools, NodePoolsArgs
from infra.registry import Registry, RegistryArgs
from infra.storage import DataBucket, DataBucketArgs
from infra.workspace import RunsWorkspace, RunsWorkspaceArgs

cfg = stack_config.load()

identity = Identity("identity", IdentityArgs(project=cfg.project, stack=cfg.stack))
registry = Registry(
    "registry",
    RegistryArgs(
        project=cfg.project,
        region=cfg.region,
        repository_id=cfg.registry_name,
        reader_member=member_of(identity.node_account),
    ),
)
storage = DataBucket(
    "data",
    DataBucketArgs(
        project=cfg.project,
        location=cfg.region,
        name=cfg.data_bucket,
        trainer_member=member_of(identity.trainer_account),
    ),
)
cluster = Cluster("cluster", ClusterArgs(config=cfg, node_service_account=identity.node_account.email))
pools = NodePools(
    "accelerators",
    NodePoolsArgs(config=cfg, cluster_id=cluster.cluster.id, node_service_account=identity.node_account.email),
)
kube = KubernetesAccess(
    "gke",
    KubernetesAccessArgs(
        cluster_name=cluster.name, endpoint=cluster.endpoint, ca_certificate=cluster.ca_certificate
    ),
)
system_nodes = [cluster.system_pool] if cluster.system_pool else [cluster.cluster]
jobset = JobSetController("jobset", JobSetControllerArgs(provider=kube.provider, depends_on=system_nodes))
workspace = RunsWorkspace(
    "runs-workspace",
    RunsWorkspaceArgs(
        project=cfg.project,
        provider=kube.provider,
        trainer_account=identity.trainer_account,
        hf_token=stack_config.hf_token(),
        depends_on=[cluster.cluster],
    ),
)

pulumi.export("clusterName", cluster.name)
pulumi.export("clusterLocation", cluster.location)
pulumi.export(
    "getCredentials",
    pulumi.Output.concat(
        "gcloud container clusters get-credentials ", cluster.name,
        " --location ", cluster.location, " --project ", cfg.project,
    ),
)
pulumi.export("bucketUrl", storage.url)
pulumi.export("registryUrl", registry.url)
pulumi.export("nodeServiceAccount", identity.node_account.email)
pulumi.export("trainerServiceAccount", identity.trainer_account.email)
pulumi.export(
    "pools",
    {name: {"nodePools": list(c.node_pool_names), "nodeSelector": c.node_selector, "chips": c.total_chips}
     for name, c in pools.contracts.items()},
)

# --- runs --------------------------------------------------------------------
# The runs are declared here, after the platform, from:
#   cfg.runs, cfg.images.by_trainer(), pools.contracts,
#   kube.provider, workspace.namespace / workspace.service_account / workspace.hf_secret,
#   storage.bucket.name, jobset.release (depends_on, so the JobSet CRD exists).
from infra.images import TrainerImages, TrainerImagesArgs  # noqa: E402
from infra.runs import Runs, RunsArgs  # noqa: E402

# Trainer images: those the stack file pins by digest (`images:`) are used as
# they are; every other trainer a run needs is built from this repository,
# pushed to the stack's registry and referenced by digest (infra/images.py).
images = dict(cfg.images.by_trainer())
to_build = sorted({run.trainer for run in cfg.runs if not run.image} - images.keys())
if to_build:
    built = TrainerImages(
        "images",
        TrainerImagesArgs(
            registry_url=registry.url,
            builder=cfg.image_builder,
            trainers=to_build,
            project=cfg.project,
            region=cfg.region,
        ),
    )
    images.update(built.refs)
    pulumi.export("images", built.refs)

runs = Runs(
    "runs",
    RunsArgs(
        runs=cfg.runs,
        contracts=pools.contracts,
        bucket=storage.bucket.name,
        images=images,
        provider=kube.provider,
        depends_on=[jobset.release, workspace.namespace, workspace.service_account, workspace.hf_secret],
    ),
)
pulumi.export("runs", sorted(runs.jobsets))
