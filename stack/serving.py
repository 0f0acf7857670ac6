"""`serve:`: an OpenAI-compatible vLLM server of one run's export, on one of the stack's accelerator pools.

    gke-finetune:serve: {run: gemma4-sql, pool: a4, image: vllm/vllm-openai@sha256:<64 hex>}

The server (manifests/serving.py, components/serving.py) loads `exports/<stack>/<run>/` read-only through
Cloud Storage FUSE once the run's export is complete, on a single host of the pool, with vLLM's tensor
parallelism over every chip of that host. These rules say, before anything is declared, what the stack file
alone can tell: a run that exists and exports a whole model, a single-host accelerator pool outside Kueue,
an image pinned by digest and of the pool's family. What needs the model's shapes (does it fit the chips,
do its heads split over them, is `maxModelLen` within its context) is admission/serving.py's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field

from core.catalog import Family
from core.contract import SchedulingContract
from core.images import image_problem
from core.names import SYSTEM_POOL
from stack.models import Count, StackModel
from stack.problems import MISSING, Problem

# vLLM's own images on Docker Hub: the CUDA build and the TPU build (https://docs.vllm.ai/en/latest/deployment/docker.html,
# https://docs.vllm.ai/projects/tpu/en/latest/getting_started/installation/), by the family of the pool they run on.
VLLM_IMAGES = {Family.GPU: "vllm/vllm-openai", Family.TPU: "vllm/vllm-tpu"}
# The shipped stack files' stand-in digest: a stack file must name the vLLM release it serves with, and no digest
# can be chosen for it here (a release's support of a model, Gemma 4 in particular, is the user's choice).
PLACEHOLDER_DIGEST = "sha256:" + "0" * 64
MAX_MODEL_LEN_FLOOR = 256
MAX_REPLICAS = 64
# The system node pool a Standard cluster gets (components/cluster.py): it has no accelerator to serve on.


class ServeConfig(StackModel):
    """`serve:` of the stack: which run's export, on which pool, with which vLLM image."""

    run: str = Field(description="a run of the stack with `export:` (a merged model)")
    pool: str = Field(description="a single-host accelerator pool (Standard) or shape (Autopilot) outside Kueue")
    image: str | None = Field(default=None, description="vLLM's image by digest (required): vllm/vllm-openai@sha256:... "
                              "on GPU, vllm/vllm-tpu@sha256:... on TPU")
    max_model_len: Count = Field(default=8192, ge=MAX_MODEL_LEN_FLOOR,
                                 description="the longest prompt and answer, in tokens (vLLM --max-model-len)")
    replicas: Count = Field(default=1, ge=0, le=MAX_REPLICAS,
                            description="servers, each on a VM of its own; 0 keeps the Service and stops the servers")


def official_image(image: str) -> Family | None:
    """The family of one of vLLM's own images (`vllm/vllm-openai`, `docker.io/vllm/vllm-tpu`, ...), else None."""
    repository = image.split("@", 1)[0].split(":", 1)[0].removeprefix("docker.io/").removeprefix("index.docker.io/")
    return next((family for family, name in VLLM_IMAGES.items() if repository == name), None)


def serve_problems(serve: ServeConfig | None, runs: Sequence[Any], contracts: Mapping[str, SchedulingContract],
                   kueue_pools: set[str], autopilot: bool) -> list[Problem]:
    """Each thing the stack file gets wrong about `serve`, one problem each, under the key `serve.<field>`."""
    if serve is None:
        return []
    problems = _run_problems(serve, runs)
    contract = contracts.get(serve.pool)
    problems += _pool_problems(serve, contract, contracts, kueue_pools, autopilot)
    problems += _image_problems(serve, contract)
    if contract is not None and serve.replicas > contract.vms and not autopilot:
        problems.append(Problem("replicas", serve.replicas, f"servers need a VM each, and pool {serve.pool!r} holds at "
                                f"most {contract.vms}", f"0..{contract.vms}, or a pool of more VMs"))
    return [p.under("serve") for p in problems]


def _run_problems(serve: ServeConfig, runs: Sequence[Any]) -> list[Problem]:
    run = next((r for r in runs if r.name == serve.run), None)
    if run is None:
        return [Problem("run", serve.run, "is not a run of the stack", ", ".join(repr(r.name) for r in runs) or
                        "a run of the stack (it has none)")]
    if run.export is None:
        return [Problem("run", serve.run, "has no `export:`, and the server loads the run's export",
                        f"a run with `export:` ({_exporting(runs)}), or `export: {{format: huggingface}}` on run "
                        f"{serve.run!r}")]
    if not run.export.merge:
        return [Problem("run", serve.run, "exports its LoRA adapter alone (`export.merge: false`), and the server "
                        "loads a whole model", f"`export.merge: true` on run {serve.run!r}")]
    return []


def _exporting(runs: Sequence[Any]) -> str:
    return ", ".join(repr(r.name) for r in runs if r.export is not None) or "none in this stack"


def _pool_problems(serve: ServeConfig, contract: SchedulingContract | None, contracts: Mapping[str, SchedulingContract],
                   kueue_pools: set[str], autopilot: bool) -> list[Problem]:
    allowed = ", ".join(repr(n) for n, c in sorted(contracts.items()) if c.hosts_per_slice == 1 and n not in kueue_pools)
    allowed = f"a single-host accelerator {'shape' if autopilot else 'pool'} outside Kueue: {allowed or 'none here'}"
    if contract is None:
        why = ("is the cluster's system node pool, which has no accelerator" if serve.pool == SYSTEM_POOL and not autopilot
               else f"is not an accelerator {'shape' if autopilot else 'pool'} of the stack")
        return [Problem("pool", serve.pool, why, allowed)]
    if contract.hosts_per_slice > 1 or contract.slices > 1:
        # https://cloud.google.com/kubernetes-engine/docs/tutorials/serve-vllm-tpu: "multi-host configurations are
        # not supported when using vLLM with TPUs on GKE".
        return [Problem("pool", serve.pool, f"is {contract.shape.description} x{contract.slices}: a multi-host slice, "
                        "and vLLM on GKE serves from one host", allowed)]
    if serve.pool in kueue_pools:
        # Kueue's quota counts what it admits; a server beside it would take nodes the quota calls free (and a queued
        # pool has nodes only for ProvisioningRequests). Kueue can admit a Deployment's pods one by one, but only
        # through its `deployment` integration (https://kueue.sigs.k8s.io/docs/tasks/run/deployment/), which the
        # stack's Kueue leaves off: it manages the runs' JobSets alone (manifests/controllers.py KUEUE_FRAMEWORKS).
        return [Problem("pool", serve.pool, "is a pool Kueue admits runs to (a ladder rung, queued capacity or a "
                        "priority), and a server outside its quota would take capacity the quota counts as free",
                        allowed)]
    return []


def _image_problems(serve: ServeConfig, contract: SchedulingContract | None) -> list[Problem]:
    family = contract.family if contract is not None else None
    wanted = (f"{VLLM_IMAGES[family]}@sha256:<64 hex digits>" if family else
              " | ".join(f"{name}@sha256:<64 hex digits> ({f.value.upper()})" for f, name in VLLM_IMAGES.items()))
    how = "`docker buildx imagetools inspect vllm/vllm-openai:v<version>` prints a release's digest"
    if serve.image is None:
        return [Problem("image", MISSING, "is required: no vLLM release is chosen for you, since which one serves a "
                        "model is yours to decide", f"{wanted}; {how}")]
    if image_problem(serve.image):
        return [Problem("image", serve.image, "must be pinned by digest, never a tag", f"{wanted}; {how}")]
    official = official_image(serve.image)
    if family is not None and official is not None and official is not family:
        return [Problem("image", serve.image, f"is vLLM's {official.value.upper()} image, and pool {serve.pool!r} is "
                        f"{family.value.upper()}", wanted)]
    return []


def placeholder_problems(serve: Any) -> list[Problem]:
    """The shipped stack files' stand-in digest, refused for `pulumi up` as their placeholder project is."""
    image = (serve or {}).get("image") if isinstance(serve, dict) else None
    if not isinstance(image, str) or not image.endswith(PLACEHOLDER_DIGEST):
        return []
    return [Problem("serve.image", image, "is the shipped stack files' placeholder digest, refused for `pulumi up` "
                    "(plan and preview take it)", "the digest of the vLLM release you serve with: `docker buildx "
                    "imagetools inspect vllm/vllm-openai:v<version>` prints it")]
