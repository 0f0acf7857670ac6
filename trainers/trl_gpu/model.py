"""Hugging Face token, tokenizer, base model and LoRA configuration.

The token is never a flag: huggingface_hub reads `HF_TOKEN`, or the file that
`HF_TOKEN_PATH` names (the run manifest mounts the token's Secret Manager version there).
Problems a retry cannot fix (no token, a rejected token, an unknown model id)
become `ConfigError`; network trouble stays an ordinary error, so the pod is
restarted and tries again.
"""

from __future__ import annotations

import logging
import os
import re

import torch
from huggingface_hub import errors as hub_errors
from huggingface_hub import get_token, whoami
from peft import LoraConfig
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from trainers.exit_codes import ConfigError

from . import templates

log = logging.getLogger(__name__)

# The attention and MLP projections of every decoder layer (Gemma 3 and 4).
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
# Multimodal Gemma checkpoints carry vision/audio towers with the same
# projection names; the adapter is for the text decoder only.
LORA_EXCLUDE = r".*(vision_tower|audio_tower|embed_vision|embed_audio|multi_modal_projector).*"


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes", "on")


def network_trouble(err: BaseException) -> bool:
    """True when `err` comes from failing to reach the Hub while online: worth
    a retry (an ordinary failure), unlike a wrong id (a configuration error).
    Offline mode makes "not reachable" final, hence a configuration error."""
    if hub_offline():
        return False
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        # httpx2 (huggingface_hub's client) raises its own transport errors.
        if isinstance(err, (ConnectionError, TimeoutError)) or type(err).__module__.startswith("httpx"):
            return True
        err = err.__cause__ or err.__context__
    return False


def is_local(model_id: str) -> bool:
    return os.path.isdir(model_id)


def _token_source() -> str:
    path = os.environ.get("HF_TOKEN_PATH")
    return f"the file HF_TOKEN_PATH={path!r}" if path else "HF_TOKEN"


def check_hub_token(model_id: str, push_to_hub: bool) -> None:
    """Fail early, before any download or training, when the run needs the
    Hub (a Hub model id, or --push_to_hub) and the token is missing or rejected."""
    if is_local(model_id) and not push_to_hub:
        return
    token = get_token()
    reason = f"--model_id={model_id!r} is a Hub id" if not is_local(model_id) else "--push_to_hub is set"
    if not token:
        raise ConfigError(
            f"no Hugging Face token: {reason}; set HF_TOKEN or mount the token and point HF_TOKEN_PATH at it "
            f"(HF_TOKEN_PATH={os.environ.get('HF_TOKEN_PATH')!r})"
        )
    if hub_offline():
        return  # offline: the token cannot be checked here
    try:
        whoami(token=token)
    except hub_errors.HfHubHTTPError as err:
        status = getattr(err.response, "status_code", None)
        if status in (401, 403):
            raise ConfigError(f"the Hugging Face token from {_token_source()} was rejected ({status})") from err
        raise


def load_tokenizer(model_id: str, trust_remote: bool, use_fast: bool, chat_template: str | None = None,
                   revision: str | None = None):
    """The model's tokenizer; `chat_template` (a file or a known name, see
    templates.py) replaces the template it ships, or supplies one it lacks."""
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_id, trust_remote_code=trust_remote, use_fast=use_fast,
                                                  revision=revision)
    except (hub_errors.RepositoryNotFoundError, hub_errors.GatedRepoError) as err:
        raise ConfigError(f"--model_id={model_id!r}: {err}") from err
    except (OSError, ValueError) as err:
        if network_trouble(err):
            raise
        raise ConfigError(f"--model_id={model_id!r}: cannot load its tokenizer: {err}") from err
    if chat_template:
        tokenizer.chat_template = templates.resolve(chat_template)
    if not tokenizer.chat_template:
        raise ConfigError(
            f"--model_id={model_id!r}: the tokenizer has no chat template (a pretrained checkpoint); "
            f"pass --chat_template with a file or one of {sorted(templates.known_templates())}"
        )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_config(model_id: str, trust_remote: bool, revision: str | None = None):
    try:
        return AutoConfig.from_pretrained(model_id, trust_remote_code=trust_remote, revision=revision)
    except (hub_errors.RepositoryNotFoundError, hub_errors.GatedRepoError) as err:
        raise ConfigError(f"--model_id={model_id!r}: {err}") from err
    except (OSError, ValueError, KeyError) as err:
        if network_trouble(err):
            raise
        raise ConfigError(f"--model_id={model_id!r} is not a model this trainer can load: {err}") from err


def check_liger_support(config) -> None:
    """Liger patches a model by its model_type; one it has no kernels for
    would silently train without them (transformers only logs a warning)."""
    from liger_kernel.transformers.monkey_patch import MODEL_TYPE_TO_APPLY_LIGER_FN

    if config.model_type not in MODEL_TYPE_TO_APPLY_LIGER_FN:
        raise ConfigError(
            f"--use_liger_kernel: liger-kernel has no kernels for model type {config.model_type!r}; "
            f"it supports {sorted(k for k in MODEL_TYPE_TO_APPLY_LIGER_FN if k.startswith('gemma'))} among Gemma models"
        )


def load_model(model_id: str, bf16: bool, trust_remote: bool, use_liger_kernel: bool = False,
               revision: str | None = None):
    """The base causal LM, in bf16 when training in bf16 (as on A4), fp32 on CPU."""
    config = load_config(model_id, trust_remote, revision)
    if use_liger_kernel:
        check_liger_support(config)
    config.use_cache = False  # the KV cache is useless in training and breaks gradient checkpointing
    if hasattr(config, "text_config") and config.text_config is not None:
        config.text_config.use_cache = False
    dtype = torch.bfloat16 if bf16 else torch.float32
    try:
        model = AutoModelForCausalLM.from_pretrained(
            model_id, config=config, dtype=dtype, attn_implementation="sdpa", trust_remote_code=trust_remote,
            revision=revision,
        )
    except ValueError as err:  # e.g. a config with no causal-LM head
        raise ConfigError(f"--model_id={model_id!r}: {err}") from err
    log.info("loaded %s (%s, %.1fM parameters)", type(model).__name__, dtype, model.num_parameters() / 1e6)
    return model


def lora_config(r: int, alpha: int, dropout: float, model=None) -> LoraConfig:
    # PEFT warns when an exclusion matches nothing, so it is only set for
    # checkpoints that have the multimodal towers.
    has_towers = model is not None and any(re.fullmatch(LORA_EXCLUDE, name) for name, _ in model.named_modules())
    return LoraConfig(
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        bias="none",
        target_modules=LORA_TARGETS,
        exclude_modules=LORA_EXCLUDE if has_towers else None,
        task_type="CAUSAL_LM",
    )


def decoder_layer_class(model) -> str:
    """Name of the class that FSDP should wrap: the model's repeated decoder
    layer (Gemma4TextDecoderLayer, Gemma3DecoderLayer, ...)."""
    names = set()
    for module in model.modules():  # a PEFT or FSDP wrapper keeps the list on the inner model
        names.update(getattr(module, "_no_split_modules", None) or [])
    for module in model.modules():
        if type(module).__name__ in names and "Decoder" in type(module).__name__:
            return type(module).__name__
    raise ValueError(f"no decoder layer class found in {type(model).__name__}")
