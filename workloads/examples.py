"""One run of every manifest shape the platform builds, on example pools.

Rendered to tests/golden/examples/ next to the shipped stacks' runs, so that
a reviewer sees every shape (single-host, multi-host and multislice TPU, A4
with a reservation) even when no shipped stack declares it.
"""

from __future__ import annotations

from infra.accelerators import lookup
from infra.names import POOL_LABEL
from infra.scheduling import SchedulingContract
from workloads.manifests import PlatformFacts
from workloads.spec import RunConfig

_DIGEST = "sha256:" + "0" * 64
FACTS = PlatformFacts(
    bucket="example-finetune-data",
    images={
        "gemma-jax": f"us-docker.pkg.dev/example-project/finetune/gemma-jax@{_DIGEST}",
        "trl-gpu": f"us-docker.pkg.dev/example-project/finetune/trl-gpu@{_DIGEST}",
    },
)


def contract(pool: str, accelerator: str, topology: str | None, machine_type: str | None = None,
             slices: int = 1, reservation: str | None = None) -> SchedulingContract:  # fmt: skip
    """A pool's contract as the node pools publish it: catalog selector plus the pool label."""
    shape = lookup(accelerator, topology, machine_type)
    return SchedulingContract(
        pool=pool,
        shape=shape,
        slices=slices,
        node_selector={**shape.node_selector(), POOL_LABEL: pool},
        tolerations=(shape.accelerator.taint.toleration(),),
        node_pool_names=tuple(f"{pool}-{i}" for i in range(slices)),
        reservation=reservation,
    )


CONTRACTS = {
    c.pool: c
    for c in (
        contract("v6e-1x1", "tpu-v6e", "1x1"),
        contract("v6e-2x4", "tpu-v6e", "2x4", "ct6e-standard-4t"),
        contract("v6e-2x4-x2", "tpu-v6e", "2x4", "ct6e-standard-4t", slices=2),
        contract("a4", "nvidia-b200", None, reservation="a4-reservation"),
    )
}

_TPU_ARGS = ("--maxlen", "256", "--batch_size", "64")
RUNS = (
    RunConfig(name="gemma3-single-host", trainer="gemma-jax", pool="v6e-1x1", data="TinyStories-train.txt",
              args=(*_TPU_ARGS, "--datacount", "355120"), profile=True),
    RunConfig(name="gemma3-multi-host", trainer="gemma-jax", pool="v6e-2x4", data="TinyStories-train.txt",
              args=(*_TPU_ARGS, "--datacount", "5120")),
    RunConfig(name="gemma3-multislice", trainer="gemma-jax", pool="v6e-2x4-x2", data="TinyStories-train.txt",
              args=(*_TPU_ARGS, "--datacount", "5120")),
    RunConfig(name="gemma4-sql-a4", trainer="trl-gpu", pool="a4",
              args=("--model_id", "google/gemma-4-31b-it", "--num_train_epochs", "3",
                    "--per_device_train_batch_size", "2", "--gradient_accumulation_steps", "32",
                    "--learning_rate", "1e-5")),
)  # fmt: skip
