"""Accelerator node pools (Standard) and the scheduling contracts they publish.

One logical pool of the stack config becomes one GKE node pool per slice. On
Autopilot no pool is declared; the contracts still come from here, derived
from the stack's `shapes:`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from core.catalog import RESERVATION_AFFINITY_KEY, Family
from components.cluster import CLOUD_PLATFORM_SCOPE, node_tags, shielded
from stack.config import StackConfig
from stack.models import PoolConfig
from core.contract import SchedulingContract
from stack.contracts import node_labels, node_taints


@dataclass
class NodePoolsArgs:
    config: StackConfig
    cluster_id: pulumi.Input[str]
    node_service_account: pulumi.Input[str]  # email


class NodePools(pulumi.ComponentResource):
    """Declares the accelerator pools; `contracts` maps each pool (or shape) name to its contract."""

    contracts: dict[str, SchedulingContract]
    node_pools: dict[str, gcp.container.NodePool]  # by GKE node pool name

    def __init__(self, name: str, args: NodePoolsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-finetune:platform:NodePools", name, None, opts)
        cfg = args.config
        self.contracts = cfg.contracts()
        self.node_pools = {}
        for pool in () if cfg.autopilot else cfg.pools:
            for gke_name in self.contracts[pool.name].node_pool_names:
                self.node_pools[gke_name] = self._node_pool(gke_name, pool, args)
        self.register_outputs({"node_pools": list(self.node_pools)})

    def _node_pool(self, gke_name: str, pool: PoolConfig, args: NodePoolsArgs) -> gcp.container.NodePool:
        cfg, shape = args.config, pool.shape()
        deferred = pool.capacity in ("queued", "flex-start")
        return gcp.container.NodePool(
            f"pool-{gke_name}",
            project=cfg.project,
            cluster=args.cluster_id,
            location=cfg.region,
            name=gke_name,
            node_locations=list(cfg.pool_zones(pool)),
            # The size the pool is created with. The provider recreates the pool
            # when this changes, so later changes of minNodes go to the
            # autoscaler alone; its docstring suggests ignoring the field
            # after creation, as cluster-toolkit's gke-node-pool does.
            initial_node_count=pool.autoscaling.min_nodes,
            autoscaling=_autoscaling(pool),
            placement_policy=_placement(shape),
            queued_provisioning=(
                gcp.container.NodePoolQueuedProvisioningArgs(enabled=True)
                if pool.capacity == "queued" else None
            ),
            # Auto-repair would recreate nodes a provisioning request released.
            # https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest
            management=gcp.container.NodePoolManagementArgs(auto_repair=not deferred, auto_upgrade=True),
            node_config=_node_config(pool, args.node_service_account, node_tags(cfg)),
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["initialNodeCount"]),
        )


def _autoscaling(pool: PoolConfig) -> gcp.container.NodePoolAutoscalingArgs:
    """Node count bounds the cluster autoscaler keeps the pool within.

    A multi-host TPU slice is created or removed whole, and GKE validates its
    size against the per-zone bounds (with total bounds the per-zone maximum
    is 0: "Maximum node count 0 is not a valid size of TPU pod slice"); its
    one zone holds all of it, so per-zone bounds are the slice's bounds, with
    location policy ANY as cluster-toolkit's gke-node-pool sets for TPUs.
    Capacity obtained on request (queued, flex-start) also comes from any
    zone that has it. Other pools balance their nodes across their zones.
    https://cloud.google.com/kubernetes-engine/docs/concepts/cluster-autoscaler#location_policy
    """
    if pool.shape().multi_host:
        return gcp.container.NodePoolAutoscalingArgs(
            min_node_count=pool.autoscaling.min_nodes, max_node_count=pool.max_nodes(), location_policy="ANY"
        )
    deferred = pool.capacity in ("queued", "flex-start")
    return gcp.container.NodePoolAutoscalingArgs(
        total_min_node_count=pool.autoscaling.min_nodes,
        total_max_node_count=pool.max_nodes(),
        location_policy="ANY" if deferred else "BALANCED",
    )


def _placement(shape) -> gcp.container.NodePoolPlacementPolicyArgs | None:
    """Multi-host TPU slices need COMPACT placement with the slice topology.
    https://cloud.google.com/kubernetes-engine/docs/how-to/tpus#multi-host"""
    if shape.family is not Family.TPU or not shape.multi_host:
        return None
    return gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT", tpu_topology=shape.topology)


def _node_config(
    pool: PoolConfig, service_account: pulumi.Input[str], tags: list[str]
) -> gcp.container.NodePoolNodeConfigArgs:
    shape = pool.shape()
    return gcp.container.NodePoolNodeConfigArgs(
        machine_type=shape.machine_type,
        # The sized boot disk holds the images and, where no local SSD does,
        # the pods' ephemeral storage (core/allocatable.py).
        disk_size_gb=pool.disk_gb(),
        disk_type=shape.machine.boot_disk_type,
        service_account=service_account,
        oauth_scopes=[CLOUD_PLATFORM_SCOPE],
        tags=tags,
        labels=node_labels(pool),
        taints=[
            gcp.container.NodePoolNodeConfigTaintArgs(key=t.key, value=t.value, effect=_effect(t.effect))
            for t in node_taints(pool)
        ],
        spot=pool.capacity == "spot",
        # Queued provisioning runs on flex-start VMs: GKE's queued-provisioning
        # guide creates such pools with both --enable-queued-provisioning and
        # --flex-start, as cluster-toolkit's v6e queued example and xpk do.
        # https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest
        flex_start=True if pool.capacity in ("flex-start", "queued") else None,
        guest_accelerators=_gpus(shape),
        ephemeral_storage_local_ssd_config=_local_ssd_ephemeral_storage(shape),
        # A4 VMs network through gVNIC (https://cloud.google.com/compute/docs/accelerator-optimized-machines#a4-vms);
        # GKE puts it on a pool's nodes only when asked.
        # https://cloud.google.com/kubernetes-engine/docs/how-to/using-gvnic
        gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True) if shape.family is Family.GPU else None,
        reservation_affinity=_reservation_affinity(pool),
        workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
        shielded_instance_config=shielded(),
    )


def _effect(kubernetes_effect: str) -> str:
    """GKE spells taint effects NO_SCHEDULE where Kubernetes spells NoSchedule."""
    return {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}[
        kubernetes_effect
    ]


def _gpus(shape) -> list | None:
    if shape.family is not Family.GPU:
        return None
    return [
        gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
            type=shape.accelerator.gke_accelerator,
            count=shape.chips_per_vm,
            # GKE installs the driver; B200 needs the LATEST branch.
            # https://cloud.google.com/kubernetes-engine/docs/how-to/gpus#install-drivers
            gpu_driver_installation_config=gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                gpu_driver_version="LATEST"
            ),
        )
    ]


def _local_ssd_ephemeral_storage(shape):
    """The machine's bundled local SSDs as the nodes' ephemeral storage (emptyDirs, container
    layers, logs) instead of the boot disk: an A4 run keeps its Hub model (tens of GB) in an
    emptyDir. https://cloud.google.com/kubernetes-engine/docs/how-to/persistent-volumes/local-ssd
    """
    if not shape.local_ssd_count:
        return None
    return gcp.container.NodePoolNodeConfigEphemeralStorageLocalSsdConfigArgs(
        local_ssd_count=shape.local_ssd_count
    )


def _reservation_affinity(pool: PoolConfig):
    if pool.capacity == "reservation":
        return gcp.container.NodePoolNodeConfigReservationAffinityArgs(
            consume_reservation_type="SPECIFIC_RESERVATION", key=RESERVATION_AFFINITY_KEY, values=[pool.reservation]
        )
    if pool.capacity in ("spot", "flex-start", "queued"):
        return gcp.container.NodePoolNodeConfigReservationAffinityArgs(consume_reservation_type="NO_RESERVATION")
    return None
