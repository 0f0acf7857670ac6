"""Would GKE admit and schedule the stack's model server (`serve:`), and would vLLM load its model?

The server's pod goes through the rules every run's pod does (its fit on one node of its pool, the FUSE
sidecar included; Kubernetes' syntax; Autopilot's rules), and its model through what vLLM needs:

- tensor parallelism over every chip of the host splits the attention heads evenly: vLLM refuses a
  model whose head count the chips don't divide (vllm-project/vllm vllm/config/model.py,
  `ModelConfig.verify_with_parallel_config`: "Total number of attention heads must be divisible by tensor
  parallel size");
- `maxModelLen` within the model's context (core/models.py);
- the model on each chip, estimated from its shapes (trainers/gemma_jax/model_shapes.json), in bytes:
  its 16-bit weights split over the T chips, 2 P / T; one sequence of `maxModelLen` tokens in the KV cache,
  2 (keys and values) x 2 bytes x head_dim x the layer's KV heads on the chip (max(1, kv_heads / T): vLLM
  copies a KV head to every chip when there are fewer heads than chips), summed over the layers (an upper
  bound: the sliding-window layers hold less); and the runtime's own (admission/accelerator_memory.py
  GPU_RUNTIME_GIB). vLLM takes `gpu-memory-utilization` of the chip (manifests/serving.py), which must hold it.
"""

from __future__ import annotations

from collections.abc import Mapping

from admission import accelerator_memory, autopilot, fit, syntax
from admission.findings import Finding
from core.models import MODELS
from core.names import export_prefix
from manifests.run import build_run, platform_facts
from manifests.serving import GPU_MEMORY_UTILIZATION, ServeFacts, server_manifests
from stack.config import StackConfig
from stack.images import offline_images
from stack.problems import Problem
from stack.queueing import run_contract
from stack.serving import MAX_MODEL_LEN_FLOOR

BYTES_PER_VALUE = 2  # served in 16 bits (a float32 export is served as bfloat16: serve_facts)


def served_model(config: StackConfig) -> str | None:
    """The model the served run fine-tunes (core/models.py), from its container as the manifest builds it."""
    run = next(r for r in config.runs if r.name == config.serve.run)
    contracts = config.contracts()
    manifest = build_run(run, run_contract(run, contracts), platform_facts(config, offline_images(config)))
    container = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    return accelerator_memory.run_model(run, list(container.get("args", [])))


def _shape(model: str | None):
    from trainers.gemma_jax.memory import shapes  # pylint: disable=import-outside-toplevel

    return shapes().get(model) if model else None


def serve_facts(config: StackConfig) -> ServeFacts:
    """What the stack gives its server: the export, the server's account, the model's weights as served."""
    run = next(r for r in config.runs if r.name == config.serve.run)
    shape = _shape(served_model(config))
    dtype = run.export.dtype if run.export.dtype in ("bfloat16", "float16") else "bfloat16"
    return ServeFacts(bucket=config.data_bucket, namespace=config.runs_namespace,
                      service_account=config.server_account, export_prefix=export_prefix(config.stack, run.name),
                      weights_bytes=shape.params * BYTES_PER_VALUE if shape else None, dtype=dtype)


def serve_manifests(config: StackConfig) -> dict[str, dict]:
    """The stack's server objects by `<kind>-<name>`; none without `serve:`."""
    if config.serve is None:
        return {}
    return server_manifests(config.serve, config.contracts()[config.serve.pool], serve_facts(config))


def chip_memory(config: StackConfig) -> accelerator_memory.ChipMemory | None:
    """The served model per chip against what vLLM takes of a chip; None for a model the platform has no shapes of."""
    model = served_model(config)
    shape = _shape(model)
    if shape is None:
        return None
    contract, serve = config.contracts()[config.serve.pool], config.serve
    chips = contract.chips_per_host
    kv_per_token = sum(2 * BYTES_PER_VALUE * head_dim * max(1, kv_heads // chips) for head_dim, kv_heads, _ in shape.layers)
    needed = (BYTES_PER_VALUE * shape.params / chips + serve.max_model_len * kv_per_token) / accelerator_memory.GIB
    hbm = contract.shape.accelerator.hbm_gib_per_chip
    return accelerator_memory.ChipMemory(
        serve.run, model, serve.pool, needed + accelerator_memory.GPU_RUNTIME_GIB, hbm,
        (1 - GPU_MEMORY_UTILIZATION) * hbm,
        f"estimate of admission/serving.py: its weights over {chips} chips and one {serve.max_model_len}-token "
        "sequence's KV cache")


def model_problems(config: StackConfig) -> list[Problem]:
    """The served model against its pool's chips: memory, heads, context."""
    model = served_model(config)
    shape = _shape(model)
    if shape is None:
        return []
    serve, chips = config.serve, config.contracts()[config.serve.pool].chips_per_host
    problems = []
    if shape.num_heads % chips:
        problems.append(Problem("serve.pool", serve.pool, f"has {chips} chips per host, and vLLM's tensor parallelism "
                                f"splits model {model}'s {shape.num_heads} attention heads evenly over them",
                                f"a pool whose chips per host divide {shape.num_heads}"))
    context = MODELS[model].context_tokens
    if serve.max_model_len > context:
        problems.append(Problem("serve.maxModelLen", serve.max_model_len, f"is longer than model {model}'s context "
                                f"of {context} tokens", f"{MAX_MODEL_LEN_FLOOR}..{context}"))
    memory = chip_memory(config)
    if memory is not None and not memory.fits:
        problems.append(Problem("serve.pool", serve.pool, f"serving run {serve.run!r}: {accelerator_memory.why(memory)}",
                                "a pool of more (or larger) chips, a smaller `maxModelLen`"))
    return problems


def pod_findings(config: StackConfig, manifests: Mapping[str, Mapping]) -> list[Finding]:
    """The server's objects by Kubernetes' syntax, and its pod on one node of its pool."""
    contract = config.contracts()[config.serve.pool]
    found = []
    for key, manifest in manifests.items():
        found += [*syntax.object_name_findings(manifest["metadata"], f"{key}.metadata"),
                  *syntax.metadata_findings(manifest["metadata"], f"{key}.metadata")]
        if manifest["kind"] != "Deployment":
            continue
        template, where = manifest["spec"]["template"], f"{key}.spec.template"
        found += [*syntax.pod_findings(template, where), *fit.fit_findings(template, contract.allocatable,
                                                                           f"{where}.requests")]
        if contract.autopilot:
            found += list(autopilot.autopilot_findings(template, contract.shape.accelerator, where))
    return found


def serving_problems(config: StackConfig) -> list[Problem]:
    """Every reason GKE or vLLM would refuse the stack's server; none without `serve:`."""
    if config.serve is None:
        return []
    problems = model_problems(config)
    problems += [Problem("serve", config.serve.run, f"would be refused by {'GKE' if f.rule == 'fit' else 'Kubernetes'} "
                         f"({f.rule}): {f.where}: {f.value} {f.why} ({f.source})")
                 for f in pod_findings(config, serve_manifests(config))]
    return problems

