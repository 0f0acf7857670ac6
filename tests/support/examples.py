"""One run of every manifest shape the platform builds, on example pools.

Rendered to tests/golden/examples/ next to the shipped stacks' runs, so that
a reviewer sees every shape (single-host, multi-host and multislice TPU, A4
with a reservation) even when no shipped stack declares it. The pools are
stack-file pools and their contracts are derived by the code that derives a
real stack's (stack/contracts.py).
"""

from __future__ import annotations

import dataclasses

from core.names import RUNS_NAMESPACE, BucketLayout, export_prefix, trainer_service_account
from manifests.run import PlatformFacts
from manifests.serving import ServeFacts, server_manifests
from stack.contracts import contract_for
from stack.models import PoolConfig
from stack.own_container import RunAs
from stack.runs import RunConfig
from stack.serving import ServeConfig

_DIGEST = "sha256:" + "0" * 64
FACTS = PlatformFacts(
    bucket="example-finetune-data",
    images={
        "gemma-jax": f"us-docker.pkg.dev/example-project/finetune/gemma-jax@{_DIGEST}",
        "trl-gpu": f"us-docker.pkg.dev/example-project/finetune/trl-gpu@{_DIGEST}",
    },
    namespace=RUNS_NAMESPACE,
    service_account=trainer_service_account("example"),
    layout=BucketLayout("example"),
)

POOLS = (
    PoolConfig(name="v6e-1x1", accelerator="tpu-v6e", topology="1x1"),
    PoolConfig(name="v6e-2x4", accelerator="tpu-v6e", topology="2x4", machine_type="ct6e-standard-4t"),
    PoolConfig(name="v6e-2x4-x2", accelerator="tpu-v6e", topology="2x4", machine_type="ct6e-standard-4t", slices=2),
    PoolConfig(name="a4", accelerator="nvidia-b200", capacity="reservation", reservation="a4-reservation"),
)
CONTRACTS = {pool.name: dataclasses.replace(contract_for(pool, autopilot=False), namespace=RUNS_NAMESPACE)
             for pool in POOLS}

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
                    "--per_device_train_batch_size", "8", "--gradient_accumulation_steps", "8",
                    "--learning_rate", "1e-5")),
    # Your own data: a conversational file, the loss on the assistant's turns.
    RunConfig(name="gemma3-chat", trainer="gemma-jax", pool="v6e-1x1", data="tickets/chats.jsonl",
              format="conversational", columns={"messages": "turns"}, system_prompt="Answer support tickets.",
              args=("--model", "gemma3-270m", "--maxlen", "512", "--batch_size", "32", "--datacount", "20000")),
    # Your own container: on a multi-host TPU slice (the environment jax.distributed reads) and on A4.
    RunConfig(name="own-jax", pool="v6e-2x4", image=f"us-docker.pkg.dev/example-project/team/train@{_DIGEST}",
              command=("python", "-m", "team.train"), args=("--steps", "1000"), data="tickets"),
    RunConfig(name="own-jax-x2", pool="v6e-2x4-x2", image=f"us-docker.pkg.dev/example-project/team/train@{_DIGEST}",
              command=("python", "-m", "team.train"), data="tickets"),
    RunConfig(name="own-torch", pool="a4", image=f"us-docker.pkg.dev/example-project/team/torch@{_DIGEST}",
              command=("torchrun", "--nproc-per-node", "8", "train.py"), hf_token=True,
              run_as=RunAs(user=1000, group=1000)),
)  # fmt: skip


# A model server of each family (`serve:`): vLLM's TPU image on the single-host v6e, its GPU image on A4.
SERVERS = (
    (ServeConfig(run="gemma3-single-host", pool="v6e-1x1", image=f"vllm/vllm-tpu@{_DIGEST}"), "gemma3-270m"),
    (ServeConfig(run="gemma4-sql-a4", pool="a4", image=f"vllm/vllm-openai@{_DIGEST}", max_model_len=16384),
     "gemma4-31b"),
)


def serve_manifests() -> dict[str, dict]:
    from trainers.gemma_jax.memory import shapes  # pylint: disable=import-outside-toplevel

    found = {}
    for serve, model in SERVERS:
        facts = ServeFacts(bucket=FACTS.bucket, namespace=FACTS.namespace, service_account="example-server",
                           export_prefix=export_prefix("example", serve.run), weights_bytes=shapes()[model].params * 2)
        found.update(server_manifests(serve, CONTRACTS[serve.pool], facts))
    return found
