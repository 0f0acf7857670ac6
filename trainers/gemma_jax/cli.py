"""Command-line flags, parsed once into a frozen, validated Config.

Validation that needs no accelerator happens here, so a bad flag fails in
seconds with exit code 78 (trainers.exit_codes.CONFIG_ERROR) and a message
naming the flag, the value and what is allowed.
"""

from __future__ import annotations

import argparse
import dataclasses
import os

from trainers.gemma_jax import model as model_lib

SAMPLE_PROMPT = "Once upon a time, there was a girl named Amy."


class ConfigError(Exception):
    """A configuration problem that retrying cannot fix (exit code 78)."""


@dataclasses.dataclass(frozen=True)
class Config:
    """Everything a run needs, after validation."""

    # Model.
    model: str
    tokenizer: str | None
    pretrained: str | None
    lora_rank: int
    param_dtype: str
    master_dtype: str
    # Data.
    data_path: str
    datacount: int
    eval_stories: int
    maxlen: int
    batch_size: int
    data_workers: int
    data_shards: int
    # Schedule.
    epochs: int
    steps: int
    learning_rate: float
    warmup_steps: int
    seed: int
    # Parallelism.
    fsdp: int
    distributed: str
    coordinator_address: str | None
    num_processes: int | None
    process_id: int | None
    # Checkpoints.
    checkpoint_dir: str
    save_every: int
    keep_checkpoints: int
    # Observability.
    log_dir: str
    log_every: int
    eval_every: int
    eval_batches: int
    peak_flops_per_device: float
    profile_steps: tuple[int, int] | None
    xprof_port: int
    log_samples: bool
    sample_prompt: str
    sample_tokens: int


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    return int(value) if value else None


def build_parser() -> argparse.ArgumentParser:
    """All flags; defaults follow the GKE tutorial where it has one."""
    p = argparse.ArgumentParser(
        prog="python -m trainers.gemma_jax.train",
        description="Fine-tune Gemma on TinyStories with JAX.",
    )
    add = p.add_argument
    add("--model", default="gemma3-270m", help=f"one of {', '.join(model_lib.MODELS)}")
    add(
        "--tokenizer",
        default=None,
        help="SentencePiece .model path (default: the model's gemma tokenizer)",
    )
    add(
        "--pretrained",
        default="default",
        help="Orbax params checkpoint; 'default' = the gemma _PT checkpoint of "
        "the model, 'none' = random init",
    )
    add("--lora_rank", type=int, default=0, help="0 = full fine-tune")
    add(
        "--param_dtype",
        default="bfloat16",
        choices=["bfloat16", "float32"],
        help="dtype the model computes in (and of a LoRA run's frozen base)",
    )
    add(
        "--master_dtype",
        default="float32",
        choices=["float32", "bfloat16"],
        help="dtype of the trained weights kept by the optimizer; float32 keeps "
        "small updates that bfloat16 would round away",
    )
    add("--data_path", default="/data/TinyStories-train.txt")
    add(
        "--datacount",
        type=int,
        default=296000,
        help="training stories (read after the --eval_stories held-out ones)",
    )
    add(
        "--eval_stories",
        type=int,
        default=512,
        help="stories at the head of the file held out for eval loss",
    )
    add("--maxlen", type=int, default=256, help="packed row length (tokens)")
    add("--batch_size", type=int, default=128, help="global batch, in rows")
    add(
        "--data_workers",
        type=int,
        default=4,
        help="grain worker processes used to tokenize (0 = in-process)",
    )
    add(
        "--data_shards",
        type=int,
        default=0,
        help="data shards (default: one per process); fixes the global batch "
        "composition independently of the number of hosts",
    )
    add("--epochs", type=int, default=1)
    add(
        "--steps",
        type=int,
        default=0,
        help="stop after this many steps (0 = when --epochs are consumed)",
    )
    add("--learning_rate", type=float, default=2e-5)
    add("--warmup_steps", type=int, default=0)
    add("--seed", type=int, default=42)
    add(
        "--fsdp",
        type=int,
        nargs="?",
        const=-1,
        default=1,
        help="shard params/optimizer over this many devices (bare flag = all "
        "devices of a slice; 1 = replicated)",
    )
    add(
        "--distributed",
        default="auto",
        choices=["auto", "on", "off"],
        help="jax.distributed.initialize(): auto = when a cluster env is set",
    )
    add("--coordinator_address", default=os.environ.get("JAX_COORDINATOR_ADDRESS"))
    add("--num_processes", type=int, default=_env_int("JAX_NUM_PROCESSES"))
    add("--process_id", type=int, default=_env_int("JAX_PROCESS_ID"))
    add("--checkpoint_dir", default="checkpoints")
    add("--save_every", type=int, default=200)
    add("--keep_checkpoints", type=int, default=3)
    add("--log_dir", default="logs", help="TensorBoard event files and XProf traces")
    add("--log_every", type=int, default=10)
    add("--eval_every", type=int, default=200, help="0 = only at the end")
    add("--eval_batches", type=int, default=0, help="0 = the whole held-out set")
    add(
        "--peak_flops_per_device",
        type=float,
        default=0.0,
        help="peak bf16 FLOP/s of one device; 0 = do not report MFU",
    )
    add("--profile_steps", default="", help="START:END, trace these steps into --log_dir")
    add(
        "--xprof_port", type=int, default=0, help="start the profiler server on this port (0 = off)"
    )
    add(
        "--log_samples",
        action="store_true",
        help="write the story ids of every step to <log_dir>/samples-*.jsonl",
    )
    add("--sample_prompt", default=SAMPLE_PROMPT)
    add(
        "--sample_tokens",
        type=int,
        default=32,
        help="tokens sampled before and after training (0 = skip)",
    )
    return p


def _positive(flag: str, value: int, minimum: int = 1) -> None:
    if value < minimum:
        raise ConfigError(f"--{flag}={value}: must be >= {minimum}")


def _parse_profile(value: str) -> tuple[int, int] | None:
    if not value:
        return None
    try:
        start, end = (int(x) for x in value.split(":"))
    except ValueError:
        raise ConfigError(f"--profile_steps={value!r}: expected START:END, e.g. 10:15") from None
    if not 0 < start <= end:
        raise ConfigError(f"--profile_steps={value!r}: need 0 < START <= END")
    return start, end


def _check_local_path(flag: str, value: str | None) -> None:
    """Local paths must exist; gs:// paths are checked when they are read."""
    if value and "://" not in value and not os.path.exists(value):
        raise ConfigError(f"--{flag}={value}: no such file or directory")


def parse_args(argv: list[str] | None = None) -> Config:
    """Parses and validates flags; raises ConfigError on a bad value."""
    parser = build_parser()
    try:
        ns = parser.parse_args(argv)
    except SystemExit as e:  # argparse already printed which flag is wrong.
        if e.code == 0:  # --help
            raise
        raise ConfigError("invalid command line (see the message above)") from None
    if ns.model not in model_lib.MODELS:
        raise ConfigError(
            f"--model={ns.model}: unknown; choose one of {', '.join(model_lib.MODELS)}"
        )
    for flag in (
        "maxlen",
        "batch_size",
        "datacount",
        "epochs",
        "save_every",
        "keep_checkpoints",
        "log_every",
    ):
        _positive(flag, getattr(ns, flag))
    for flag in (
        "steps",
        "eval_stories",
        "lora_rank",
        "data_workers",
        "data_shards",
        "warmup_steps",
        "eval_every",
        "eval_batches",
        "sample_tokens",
        "xprof_port",
    ):
        _positive(flag, getattr(ns, flag), minimum=0)
    if ns.maxlen < 8:
        raise ConfigError(f"--maxlen={ns.maxlen}: must be >= 8")
    if ns.learning_rate <= 0:
        raise ConfigError(f"--learning_rate={ns.learning_rate}: must be > 0")
    if ns.fsdp == 0 or ns.fsdp < -1:
        raise ConfigError(f"--fsdp={ns.fsdp}: use -1 (all devices), 1 or N > 1")
    if ns.peak_flops_per_device < 0:
        raise ConfigError(f"--peak_flops_per_device={ns.peak_flops_per_device}: must be >= 0")
    if not os.path.isfile(ns.data_path):
        raise ConfigError(f"--data_path={ns.data_path}: no such file")
    _check_local_path("tokenizer", ns.tokenizer)
    pretrained = model_lib.resolve_pretrained(ns.model, ns.pretrained)
    _check_local_path("pretrained", pretrained)
    if ns.tokenizer is None and ns.model == "tiny":
        raise ConfigError(
            "--tokenizer: required with --model=tiny (a local SentencePiece .model file)"
        )
    fields = {f.name for f in dataclasses.fields(Config)}
    values = {k: v for k, v in vars(ns).items() if k in fields}
    values["pretrained"] = pretrained
    values["profile_steps"] = _parse_profile(ns.profile_steps)
    return Config(**values)
