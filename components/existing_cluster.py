"""A cluster the stack does not declare (stack/existing.py): its Kubernetes provider, and the bucket grants
when the stack asks for them. No other Google Cloud resource: no APIs, network, cluster, node pools,
registry or firewall; the name-and-location variant reads the cluster's endpoint and CA once. Trainer
images are pinned, or built and pushed to the stack's `imageBuild.registry` (stack/existing.py).
"""

from __future__ import annotations

import pulumi

from components import namespace_policy, preflight
from components.bucket_preflight import BucketFacts
from components.images import trainer_images
from components.in_cluster import Footing
from components.kube import ExistingClusterAccess, KubeconfigAccessArgs, existing_cluster_endpoint
from components.storage import BucketGrants, BucketGrantsArgs
from core.ids import kubernetes_service_account_principal
from stack.config import StackConfig


def existing_cluster(cfg: StackConfig, bucket: BucketFacts) -> Footing:
    """A cluster the platform team runs: its provider, and the bucket grants (and, where the bucket has
    hierarchical namespace, the folders of the stack's prefixes) if the stack declares them."""
    existing = cfg.existing
    # The cluster's own state first: the stack's namespace, who installed its controllers, and what the
    # namespace's Pod Security level and quotas admit.
    if existing.by_context:
        preflight.check_context(cfg, existing.context, existing.kubeconfig or None)
        namespace_policy.check_context(cfg, existing.context, existing.kubeconfig or None)
        access = ExistingClusterAccess("gke", KubeconfigAccessArgs(context=existing.context,
                                                                   kubeconfig=existing.kubeconfig or None))
        pulumi.export("context", existing.context)
    else:
        access = ExistingClusterAccess("gke", existing_cluster_endpoint(
            existing.name, existing.location, cfg.project, existing.dns_endpoint),
            checked=lambda kubeconfig: namespace_policy.checked_kubeconfig(
                cfg, preflight.checked_kubeconfig(cfg, kubeconfig)))
        pulumi.export("clusterName", existing.name)
        pulumi.export("clusterLocation", existing.location)
    grants, stager, trainer, server = [], None, None, None
    if cfg.project_number:
        # The principals the bucket grants name, declared here or by the platform team.
        trainer = kubernetes_service_account_principal(cfg.project_number, cfg.project, cfg.runs_namespace,
                                                       cfg.trainer_account)
        stager = kubernetes_service_account_principal(cfg.project_number, cfg.project, cfg.runs_namespace,
                                                      cfg.stager_account)
        pulumi.export("trainerPrincipal", trainer)
        pulumi.export("stagerPrincipal", stager)
        if cfg.serve is not None:
            server = kubernetes_service_account_principal(cfg.project_number, cfg.project, cfg.runs_namespace,
                                                          cfg.server_account)
            pulumi.export("serverPrincipal", server)
    if existing.bucket_grants:  # projectNumber is set (stack/config.py)
        declared = BucketGrants("data", BucketGrantsArgs(
            bucket=cfg.data_bucket, trainer_member=trainer, runs=[run.name for run in cfg.runs],
            layout=cfg.bucket_layout, datasets=[d.name for d in cfg.datasets],
            existing_folders=bucket.folders if bucket.hierarchical else None, exports=cfg.export_prefixes()))
        grants = [*declared.grants, *declared.folders]
    pulumi.export("bucketUrl", f"gs://{cfg.data_bucket}")
    return Footing(provider=access.provider, images=trainer_images(cfg, None), contracts=cfg.contracts(),
                   stager_member=stager, trainer_member=trainer, bucket=grants,
                   install_controllers=existing.controllers == "install",
                   staging_grants=existing.bucket_grants,
                   server_member=server if existing.bucket_grants else None)
