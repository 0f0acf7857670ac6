"""Command-line flags (declared in flags.py), parsed once into a frozen Config.

flags.py checks what the flags alone decide (types, choices, ranges); here
come the checks that need the model registry or the file system. A bad flag
fails in seconds with exit code 78 (trainers.exit_codes.CONFIG_ERROR) and a
message naming the flag, the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import os
import re

from trainers.gemma_jax import flags, token_shards
from trainers.gemma_jax import model as model_lib
from trainers.exit_codes import ConfigError  # cli.ConfigError: the trainer's modules raise it too
from trainers.sft_data import chat, formats, mixture

SAMPLE_PROMPT = flags.SAMPLE_PROMPT
Config = flags.Flags
build_parser = flags.build_parser

# gs://BUCKET/OBJECT, bucket names as Cloud Storage allows them
# (https://cloud.google.com/storage/docs/buckets#naming).
_GCS_URL = re.compile(r"^gs://[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]/\S+$")


def check_path(flag: str, value: str | None) -> None:
    """Local paths must exist; gs:// URLs must be well formed (whether the
    object exists is known only when it is read)."""
    if not value:
        return
    if value.startswith("gs://"):
        if not _GCS_URL.match(value):
            raise ConfigError(f"--{flag}={value}: not a gs://BUCKET/PATH URL")
    elif "://" in value:
        raise ConfigError(f"--{flag}={value}: only local paths and gs:// URLs are supported")
    elif not os.path.exists(value):
        raise ConfigError(f"--{flag}={value}: no such file or directory")


def _check_hf_dir(path: str) -> None:
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise ConfigError(f"--init_from_hf={path}: no config.json (a Hugging Face model directory)")
    if not any(n.endswith(".safetensors") for n in os.listdir(path)):
        raise ConfigError(f"--init_from_hf={path}: no .safetensors weights")


def _check_combinations(cfg: Config) -> None:
    if cfg.tokenizer is None and cfg.model.startswith("tiny"):
        raise ConfigError(
            f"--tokenizer: required with --model={cfg.model} (a local SentencePiece .model)"
        )
    if cfg.inspect_batches and not cfg.inspect_out:
        raise ConfigError(f"--inspect_batches={cfg.inspect_batches}: needs --inspect_out FILE.npz")
    if cfg.num_processes is not None and cfg.process_id is not None:
        if cfg.process_id >= cfg.num_processes:
            raise ConfigError(
                f"--process_id={cfg.process_id}: must be < --num_processes={cfg.num_processes}"
            )


def chat_template(cfg: Config) -> str | None:
    """The chat template a run's chats are rendered with: --chat_template, else --init_from_hf's own,
    else the model family's shipped one; None for text."""
    if all(spec.format == "text" for spec in data_specs(cfg)):
        return None
    name = chat.template_choice(cfg.chat_template, cfg.init_from_hf, cfg.model)
    try:
        chat.ChatTemplate.named(name, "<bos>", "<eos>")
    except chat.TemplateError as e:
        raise ConfigError(f"--chat_template={name}: {e}") from None
    return name


def data_sources(cfg: Config) -> tuple[mixture.Source, ...]:
    """--data_mix's sources, checked; () without it. ConfigError (exit 78) naming the source and key."""
    if not cfg.data_mix:
        return ()
    set_too = [f"--{name}" for name in formats.DATA_FLAGS[:-1] if getattr(cfg, name) != Config.__dataclass_fields__[name].default]
    if set_too:
        raise ConfigError(f"--data_mix: {', '.join(set_too)} set beside it; each source of --data_mix carries "
                          "its own data settings")
    try:
        sources = mixture.parse(cfg.data_mix, cfg.loss_on)
    except formats.FormatError as err:
        raise ConfigError(str(err)) from None
    for i, source in enumerate(sources):
        if not os.path.exists(source.path):
            raise ConfigError(f"--data_mix: source {i} path={source.path!r}: no such file or directory")
    return sources


def data_specs(cfg: Config) -> list[formats.Spec]:
    """The data settings of every dataset the run reads."""
    return [s.spec for s in data_sources(cfg)] or [formats.spec_of_flags(cfg)]


def _check_data_path(cfg: Config) -> None:
    if data_sources(cfg):
        return
    path = cfg.data_path
    if token_shards.is_token_dir(path):
        if cfg.data_format != "text":
            raise ConfigError(f"--data_path={path}: token shards hold stories; --data_format={cfg.data_format} "
                              "reads data files (.jsonl .json .csv .parquet .txt)")
    elif not os.path.exists(path):
        raise ConfigError(f"--data_path={path}: no such file or directory")


def parse_args(argv: list[str] | None = None) -> Config:
    """Parses and validates flags; raises ConfigError on a bad value."""
    try:
        cfg = flags.parse(argv)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if not data_sources(cfg):
        formats.spec_of_flags(cfg)
    _check_data_path(cfg)
    check_path("tokenizer", cfg.tokenizer)
    if cfg.init_from_hf:
        check_path("init_from_hf", cfg.init_from_hf)
        if cfg.init_from_hf.startswith("gs://"):
            raise ConfigError(f"--init_from_hf={cfg.init_from_hf}: a local directory is needed")
        _check_hf_dir(cfg.init_from_hf)
        pretrained = None  # the Hugging Face weights are the starting point
        spm = os.path.join(cfg.init_from_hf, "tokenizer.model")
        if cfg.tokenizer is None and os.path.isfile(spm):
            cfg = dataclasses.replace(cfg, tokenizer=spm)
    else:
        pretrained = model_lib.resolve_pretrained(cfg.model, cfg.pretrained)
        check_path("pretrained", pretrained)
    _check_combinations(cfg)
    return dataclasses.replace(cfg, pretrained=pretrained, chat_template=chat_template(cfg))
