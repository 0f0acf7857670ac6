"""Multi-host setup, device mesh, parameter and batch shardings.

Mesh axes: ("data", "fsdp"). The batch is split over both axes (every device
gets its own rows); parameters and optimizer state are split over "fsdp"
only, which is size 1 (replicated, plain data parallelism) unless --fsdp asks
for more. With several slices (multislice), "data" spans the slices over DCN
and "fsdp" stays inside a slice, on ICI.
"""

from __future__ import annotations

import os

import jax
from jax.experimental import mesh_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import numpy as np

# Environment variables that mean "this pod is one process of a cluster".
_CLUSTER_ENV = (
    "JAX_COORDINATOR_ADDRESS",
    "TPU_WORKER_HOSTNAMES",
    "TPU_PROCESS_ADDRESSES",
    "TPU_PROCESS_ADDRESSES_PATH",
    "MEGASCALE_COORDINATOR_ADDRESS",
)


def initialize_distributed(
    mode: str, coordinator: str | None, num_processes: int | None, process_id: int | None
) -> bool:
    """Calls jax.distributed.initialize() when running as part of a cluster.

    On GKE TPU slices the no-argument call reads the TPU environment. Locally
    (tests), coordinator/num_processes/process_id come from flags or the
    JAX_COORDINATOR_ADDRESS / JAX_NUM_PROCESSES / JAX_PROCESS_ID variables.
    """
    wanted = mode == "on" or (
        mode == "auto" and (coordinator or any(os.environ.get(k) for k in _CLUSTER_ENV))
    )
    if not wanted:
        return False
    kwargs = {}
    if coordinator:
        kwargs = {
            "coordinator_address": coordinator,
            "num_processes": num_processes,
            "process_id": process_id,
        }
    jax.distributed.initialize(**kwargs)
    return True


def num_slices(devices=None) -> int:
    devices = jax.devices() if devices is None else devices
    return len({getattr(d, "slice_index", 0) for d in devices})


def fsdp_size(requested: int, devices=None) -> int:
    """-1 means every device of one slice."""
    devices = jax.devices() if devices is None else devices
    per_slice = len(devices) // num_slices(devices)
    return per_slice if requested == -1 else requested


def make_mesh(fsdp: int, devices=None) -> Mesh:
    """Mesh over all devices of all hosts (by default the attached ones; the
    ahead-of-time compile (aot.py) passes a TPU topology's devices)."""
    devices = jax.devices() if devices is None else list(devices)
    n, slices = len(devices), num_slices(devices)
    per_slice = n // slices
    if per_slice % fsdp:
        raise ValueError(f"--fsdp={fsdp} does not divide the {per_slice} devices of a slice")
    if slices > 1:
        grid = mesh_utils.create_hybrid_device_mesh(
            (per_slice // fsdp, fsdp), (slices, 1), devices, allow_split_physical_axes=True
        )
    elif devices[0].platform == "tpu":
        grid = mesh_utils.create_device_mesh(
            (n // fsdp, fsdp), devices, allow_split_physical_axes=True
        )
    else:
        # CPU/GPU: jax.devices() is already grouped by process.
        grid = np.asarray(devices).reshape(n // fsdp, fsdp)
    return Mesh(grid, ("data", "fsdp"))


def batch_sharding(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P(("data", "fsdp"), None))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P())


def _leaf_spec(shape: tuple[int, ...], fsdp: int) -> P:
    """Shard the largest dimension that the fsdp axis divides."""
    if fsdp == 1 or not shape:
        return P()
    dims = sorted(range(len(shape)), key=lambda i: -shape[i])
    for i in dims:
        if shape[i] % fsdp == 0 and shape[i] >= fsdp:
            spec = [None] * len(shape)
            spec[i] = "fsdp"
            return P(*spec)
    return P()


def tree_shardings(mesh: Mesh, abstract_tree, fsdp: int):
    """NamedSharding for every leaf of a (params or optimizer state) tree."""
    return jax.tree.map(
        lambda x: NamedSharding(mesh, _leaf_spec(tuple(x.shape), fsdp)), abstract_tree
    )


def local_shard_range(data_shards: int) -> range:
    """The contiguous block of data shards this process feeds."""
    per = data_shards // jax.process_count()
    start = jax.process_index() * per
    return range(start, start + per)


def global_batch(
    local: dict[str, np.ndarray], sharding: NamedSharding, global_rows: int
) -> dict[str, jax.Array]:
    """Assembles the global batch from each process's own rows.

    Every process passes only the rows it read; JAX places them on that
    process's devices. No process ever holds (or device_puts) the global batch.
    """
    out = {}
    for key in ("tokens", "segment_ids", "positions", "loss_mask"):
        if key not in local:  # loss_mask: only where the format trains some tokens only
            continue
        arr = local[key]
        out[key] = jax.make_array_from_process_local_data(
            sharding, arr, (global_rows,) + arr.shape[1:]
        )
    return out
