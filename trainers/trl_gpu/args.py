"""Command-line flags, parsed the way TRL's own scripts parse them.

Two dataclass groups go through `TrlParser`: `ScriptArguments` (model, data,
LoRA and the checks around training) and `TrainingArguments` (TRL's
`SFTConfig` with the defaults of the original Gemma text-to-SQL recipe). An
optional `--config file.yaml` sets defaults; flags on the command line
override it. Every parse or validation failure is a `ConfigError`, which the
entry point turns into exit code 78.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch
import yaml
from transformers.trainer_utils import IntervalStrategy, SaveStrategy, SchedulerType
from transformers.training_args import OptimizerNames
from trl import SFTConfig, TrlParser

from trainers.eval_report import METRICS as EVAL_METRICS
from trainers.exit_codes import ConfigError
from trainers.export_dir import DTYPES as EXPORT_DTYPES
from trainers.sft_data import formats, mixture

from . import templates

def _bf16_available() -> bool:
    # The recipe trains in bf16 on GPUs that have it (A4's B200 does); on CPU
    # the tests run in fp32.
    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()



@dataclass
class ScriptArguments:
    model_id: str = field(
        default="google/gemma-4-31b-it",
        metadata={"help": "Hub model id, or a local directory written by save_pretrained."},
    )
    model_revision: str | None = field(
        default=None,
        metadata={"help": "The Hub revision (a commit, branch or tag) of a Hub --model_id; pin a commit to repeat runs."},
    )
    dataset_name: str = field(
        default="philschmid/gretel-synthetic-text-to-sql",
        metadata={"help": "Hub dataset id, a local .jsonl/.json/.csv/.parquet file, or a local dataset directory."},
    )
    dataset_split: str = field(default="train", metadata={"help": "Split to read before the train/eval split."})
    # The data format and its settings (trainers/sft_data/formats.py declares them for both trainers).
    data_format: str = field(
        default="text",
        metadata={"help": "What a record holds: text, conversational (messages) or prompt-completion.",
                  "choices": list(formats.FORMATS)},
    )
    columns: str = field(
        default="",
        metadata={"help": "The file's names of the format's standard columns, e.g. prompt=question,completion=answer."},
    )
    prompt_template: str | None = field(
        default=None,
        metadata={"help": "prompt-completion: build the prompt from the record's columns ({column} fields); the "
                  "prompt becomes the user's turn of a chat and the completion the assistant's."},
    )
    system_prompt: str | None = field(default=None, metadata={"help": "A system turn before every chat."})
    loss_on: str = field(
        default="completion",
        metadata={"help": "completion: only the assistant's turns or the completion carry loss; all: every token.",
                  "choices": list(formats.LOSS_ON)},
    )
    data_mix: str | None = field(
        default=None,
        metadata={"help": "Several datasets mixed by weight, each with its own format: a JSON list of {path, weight, "
                  "format, columns, prompt_template, system_prompt} (trainers/sft_data/mixture.py); replaces "
                  "--dataset_name and the data settings but --loss_on."},
    )
    max_samples: int = field(default=12_500, metadata={"help": "Rows kept after the seeded shuffle (of each dataset "
                                                                "of --data_mix)."})
    eval_fraction: float = field(
        default=0.2, metadata={"help": "Held-out fraction of the kept rows (2,500 of 12,500 by default)."}
    )
    trust_remote: bool = field(default=False, metadata={"help": "Trust remote code when loading the tokenizer."})
    use_fast: bool = field(default=True, metadata={"help": "Use the fast (Rust) tokenizer."})
    chat_template: str | None = field(
        default=None,
        metadata={
            "help": "Chat template replacing the tokenizer's (required for a pretrained model without one): "
            "a .jinja file, or the name of a template TRL ships (gemma3, gemma4_v5, ...)."
        },
    )
    lora_r: int = field(default=16, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha scaling factor."})
    lora_dropout: float = field(default=0.05, metadata={"help": "LoRA dropout probability."})
    warmup_ratio: float = field(
        default=0.03, metadata={"help": "Fraction of the optimizer steps spent warming up the learning rate."}
    )
    logging_dir: str | None = field(
        default=None, metadata={"help": "TensorBoard log directory (default: <output_dir>/tensorboard)."}
    )
    merge_adapter: bool = field(
        default=False, metadata={"help": "Also save the base model with the adapter merged into <output_dir>/merged."}
    )
    sql_check_samples: int = field(
        default=0,
        metadata={"help": "After training, generate answers for this many held-out prompts and score them as SQL "
                  "(execution match where the record has sql_context); 0 skips it."},
    )
    sql_check_max_new_tokens: int = field(default=256, metadata={"help": "Generation budget of the SQL check."})
    resume: bool = field(
        default=True, metadata={"help": "Resume from the latest complete checkpoint in --output_dir if any."}
    )
    # The model once trained (a run's `export:` and `eval:`; trainers/trl_gpu/export.py).
    export_dir: str | None = field(
        default=None,
        metadata={"help": "When training succeeds, write the model here as a Hugging Face directory (config, "
                  "safetensors, tokenizer, chat template), its completion marker last."},
    )
    export_merge: bool = field(
        default=True, metadata={"help": "--export_dir: the adapter merged into the base (true), or the adapter alone."}
    )
    export_dtype: str = field(
        default="bfloat16", metadata={"help": "--export_dir: the merged weights' dtype.", "choices": list(EXPORT_DTYPES)}
    )
    eval_samples: int = field(
        default=0, metadata={"help": "--export_dir: generate this many held-out prompts and write eval.json beside it."}
    )
    eval_prompts: str | None = field(
        default=None, metadata={"help": "--export_dir: more prompts to generate for eval.json, as a JSON list of strings."}
    )
    eval_max_new_tokens: int = field(default=256, metadata={"help": "Generation budget of each eval.json sample."})
    eval_compare_base: bool = field(
        default=True, metadata={"help": "eval.json: the base model's loss and generations on the same prompts too."}
    )
    eval_metric: str = field(
        default="auto",
        metadata={"help": "eval.json's task metric: auto (SQL execution where records have sql_context), none, "
                  "sql-execution.", "choices": list(EVAL_METRICS)},
    )


@dataclass
class TrainingArguments(SFTConfig):
    """SFTConfig with the recipe's defaults; every field stays a flag."""

    output_dir: str | None = field(default="gemma-31b-text-to-sql", metadata={"help": "Checkpoint directory of the run."})
    max_length: int | None = field(default=1024, metadata={"help": "Maximum tokenized length of an example."})
    num_train_epochs: float = field(default=3.0, metadata={"help": "Number of training epochs."})
    # The recipe's global batch (8 GPUs x 2 rows x 32 accumulation steps = 512
    # rows), in micro-batches four times larger: under FSDP every micro-batch
    # all-gathers the whole model (twice: forward and backward), so fewer,
    # larger ones spend less of the step waiting on the network.
    per_device_train_batch_size: int = field(default=8, metadata={"help": "Batch size per device."})
    gradient_accumulation_steps: int = field(default=8, metadata={"help": "Gradient accumulation steps."})
    learning_rate: float = field(default=1e-5, metadata={"help": "Peak learning rate."})
    lr_scheduler_type: SchedulerType | str = field(
        default="constant_with_warmup", metadata={"help": "Scheduler; the recipe's constant rate, after warmup."}
    )
    logging_steps: float = field(default=10, metadata={"help": "Log every N optimizer steps."})
    save_strategy: SaveStrategy | str = field(default="steps", metadata={"help": "Checkpoint save strategy."})
    # transformers reads a value in (0, 1) as a fraction of the run's optimizer
    # steps (TrainingArguments.save_steps/eval_steps help; Trainer._set_initial_training_values).
    save_steps: float = field(
        default=0.05, metadata={"help": "Save a checkpoint every N optimizer steps; below 1: that fraction of the run."}
    )
    save_total_limit: int | None = field(default=3, metadata={"help": "Checkpoints kept (at least 2)."})
    eval_strategy: IntervalStrategy | str = field(default="steps", metadata={"help": "Evaluate the held-out split at intervals."})
    eval_steps: float | None = field(
        default=0.25, metadata={"help": "Evaluate every N optimizer steps; below 1: that fraction of the run."}
    )
    max_grad_norm: float = field(default=0.3, metadata={"help": "Gradient clipping norm."})
    activation_checkpointing: bool | None = field(
        default=True,
        metadata={
            "help": "Recompute each decoder layer's activations in backward (saves memory on the 31B model), "
            "non-reentrant and with the RNG state preserved, so LoRA dropout masks match in the recompute."
        },
    )
    optim: OptimizerNames | str = field(default="adamw_torch", metadata={"help": "Optimizer."})
    bf16: bool | None = field(default=_bf16_available(), metadata={"help": "bf16 mixed precision (default: on if the GPU has it)."})
    hub_private_repo: bool | None = field(default=True, metadata={"help": "Push to a private Hub repository."})
    report_to: None | str | list[str] = field(default="tensorboard", metadata={"help": "Metric sinks."})
    dataset_num_proc: int | None = field(default=None, metadata={"help": "Processes for tokenization."})


class _Parser(TrlParser):
    def error(self, message):  # argparse would exit 2; a bad flag is a configuration error
        raise ConfigError(f"invalid command line: {message}")


def real_parser() -> _Parser:
    # No abbreviations: a mistyped flag must fail, not match a longer one.
    return _Parser((ScriptArguments, TrainingArguments), allow_abbrev=False)


def parse_args(argv: list[str] | None = None) -> tuple[ScriptArguments, TrainingArguments]:
    parser = real_parser()
    try:
        script_args, training_args = parser.parse_args_and_config(args=argv)
    except ConfigError:
        raise
    except (ValueError, TypeError, OSError, IndexError, yaml.YAMLError) as err:  # __post_init__, bad --config
        raise ConfigError(str(err)) from err
    validate(script_args, training_args)
    check_accelerate_fsdp()
    apply_derived(script_args, training_args)
    return script_args, training_args


def _check(ok: bool, flag: str, value, allowed: str) -> None:
    if not ok:
        raise ConfigError(f"{flag}={value!r} is invalid: {allowed}")


def validate(script: ScriptArguments, training: TrainingArguments) -> None:
    _check(0.0 <= script.warmup_ratio < 1.0, "--warmup_ratio", script.warmup_ratio, "expected 0 <= ratio < 1")
    _check(
        training.warmup_steps == 0,
        "--warmup_steps",
        training.warmup_steps,
        "use --warmup_ratio (a fraction of the optimizer steps) instead",
    )
    _check(0.0 < script.eval_fraction < 1.0, "--eval_fraction", script.eval_fraction, "expected 0 < fraction < 1")
    _check(script.max_samples > 1, "--max_samples", script.max_samples, "expected at least 2 rows")
    _check(script.lora_r > 0, "--lora_r", script.lora_r, "expected a positive rank")
    _check(script.lora_alpha > 0, "--lora_alpha", script.lora_alpha, "expected a positive value")
    _check(0.0 <= script.lora_dropout < 1.0, "--lora_dropout", script.lora_dropout, "expected 0 <= p < 1")
    _check(script.sql_check_samples >= 0, "--sql_check_samples", script.sql_check_samples, "expected >= 0")
    _check_export(script)
    # Rotation deletes old checkpoints before the newest one is marked complete,
    # so keeping a single one could leave nothing to resume from.
    limit = training.save_total_limit
    _check(limit is None or limit >= 2, "--save_total_limit", limit, "keep at least 2 checkpoints, or unset it")
    _check(training.max_length is None or training.max_length > 8, "--max_length", training.max_length, "too small")
    _check_packing(training)
    _check_liger(training)
    templates.check_name(script.chat_template)
    if script.data_mix:
        _check_mix(script)
    else:
        formats.spec_of_flags(script)
    _check(
        not training.assistant_only_loss,
        "--assistant_only_loss",
        training.assistant_only_loss,
        "the answer-only mask is built by this trainer; leave it false",
    )
    _check(
        not training.label_names,
        "--label_names",
        training.label_names,
        "the loss reads the 'labels' column; leave it unset",
    )


def eval_prompts(script: ScriptArguments) -> list[str]:
    """--eval_prompts as a list of prompts."""
    if not script.eval_prompts:
        return []
    import json

    try:
        prompts = json.loads(script.eval_prompts)
    except ValueError as err:
        raise ConfigError(f"--eval_prompts={script.eval_prompts!r} is invalid: not JSON ({err})") from None
    _check(isinstance(prompts, list) and all(isinstance(p, str) and p.strip() for p in prompts), "--eval_prompts",
           script.eval_prompts, "expected a JSON list of prompts with text")
    return prompts


def _check_export(script: ScriptArguments) -> None:
    evaluating = script.eval_samples > 0 or bool(script.eval_prompts)
    _check(script.eval_samples >= 0, "--eval_samples", script.eval_samples, "expected >= 0")
    _check(script.eval_max_new_tokens > 0, "--eval_max_new_tokens", script.eval_max_new_tokens, "expected > 0")
    _check(not evaluating or script.export_dir is not None, "--eval_samples", script.eval_samples,
           "eval.json is written beside the export: set --export_dir too")
    eval_prompts(script)


# Strategies that keep each example whole and its boundaries known: TRL's
# "bfd" packing hands the collator each row's segment lengths, the collator
# turns them into position_ids restarting at 0 (padding-free, no attention
# mask), and transformers builds block-diagonal attention from those
# position_ids (masking_utils.find_packed_sequence_indices, used when the
# mask is None). "wrapped" cuts examples apart and lets them attend across.
PACKING_STRATEGIES = ("bfd",)


def _check_mix(script) -> None:
    defaults = ScriptArguments()
    beside = [f"--{name}" for name in formats.DATA_FLAGS[:-1] if getattr(script, name) != getattr(defaults, name)]
    if beside:
        raise ConfigError(f"--data_mix: {', '.join(beside)} set beside it; each source of --data_mix carries its "
                          "own data settings")
    try:
        mixture.parse(script.data_mix, script.loss_on)
    except formats.FormatError as err:
        raise ConfigError(str(err)) from None


def _check_packing(training: TrainingArguments) -> None:
    if training.packing or training.eval_packing:
        _check(
            training.packing_strategy in PACKING_STRATEGIES,
            "--packing_strategy",
            training.packing_strategy,
            f"expected one of {list(PACKING_STRATEGIES)} (keeps answers whole and segments apart)",
        )
    _check(
        not training.padding_free or training.packing,
        "--padding_free",
        training.padding_free,
        "use --packing true (bfd packing is padding-free) instead",
    )


def _check_liger(training: TrainingArguments) -> None:
    """Liger's kernels are Triton GPU kernels: refuse early, with the reason,
    where they cannot run (transformers would raise a bare ImportError, or
    fail inside the first kernel call)."""
    if not training.use_liger_kernel:
        return
    import importlib.util

    _check(
        importlib.util.find_spec("liger_kernel") is not None,
        "--use_liger_kernel",
        True,
        "the liger-kernel package is not installed in this environment (trainers/trl_gpu/requirements.txt pins it)",
    )
    _check(
        torch.cuda.is_available() and not training.use_cpu,
        "--use_liger_kernel",
        True,
        "Liger's Triton kernels need a CUDA GPU, and this process has none",
    )


def _accelerate_env(name: str) -> bool:
    # What `accelerate launch` exports from the config file's fsdp_config
    # (accelerate/utils/launch.py, prepare_multi_gpu_env: FSDP_VERSION,
    # FSDP_CPU_RAM_EFFICIENT_LOADING, FSDP_ACTIVATION_CHECKPOINTING).
    return os.environ.get(name, "false").lower() in ("1", "true", "yes")


def check_accelerate_fsdp() -> None:
    """Refuse the accelerate FSDP settings that break this trainer with the
    pinned versions (accelerate 1.15, transformers 5.24, peft 0.21)."""
    if not _accelerate_env("ACCELERATE_USE_FSDP"):
        return
    # accelerate's fsdp2_apply_ac wraps each decoder layer in torch's
    # checkpoint_wrapper: the layer's module names gain
    # `_checkpoint_wrapped_module.`, which the wrapper strips from state_dict()
    # keys but not from the names PEFT walks (peft/tuners/tuners_utils.py,
    # BaseTuner._get_adapter_state_dict matches state-dict keys against
    # named_modules). Sharded checkpoints then hold no adapter tensor, the final
    # adapter's keys do not load, and the wrapper passes preserve_rng_state=False,
    # so LoRA dropout differs between forward and recompute.
    _check(
        not _accelerate_env("FSDP_ACTIVATION_CHECKPOINTING"),
        "fsdp_activation_checkpointing (accelerate config)",
        True,
        "set it to false: sharded checkpoints would hold no adapter and dropout would differ in the recompute; "
        "the trainer's --activation_checkpointing (on by default) recomputes each decoder layer instead",
    )
    # accelerate 1.15's fsdp2_load_full_state_dict reads `.device_mesh` from
    # every state-dict entry, but FSDP2 shards parameters only: a persistent
    # buffer (Gemma 4's per-layer `layer_scalar`) is a plain Tensor and every
    # rank dies with AttributeError (huggingface/accelerate#3898). It would save
    # nothing either: transformers 5.24 reads the full checkpoint on every rank
    # whatever the setting (huggingface/transformers#43749; its
    # core_model_loading has no rank-0-only path).
    _check(
        not (os.environ.get("FSDP_VERSION") == "2" and _accelerate_env("FSDP_CPU_RAM_EFFICIENT_LOADING")),
        "fsdp_cpu_ram_efficient_loading (accelerate config)",
        True,
        "set it to false: with FSDP v2 it crashes on models with persistent buffers (Gemma 4; accelerate#3898), "
        "and transformers 5.24 reads the weights on every rank anyway (transformers#43749)",
    )


def apply_derived(script: ScriptArguments, training: TrainingArguments) -> None:
    # transformers reads a warmup_steps value in [0, 1) as a ratio of the total steps.
    training.warmup_steps = script.warmup_ratio
    # HF activation checkpointing (GradientCheckpointingLayer around each
    # decoder layer) through torch.utils.checkpoint: non-reentrant, and
    # preserve_rng_state left at its default True, so the recompute draws the
    # same LoRA dropout masks as the forward. transformers 5.24 defaults to
    # use_reentrant=False too (PreTrainedModel._activation_checkpointing_enable);
    # set here so neither default can change it. Under FSDP2 the recompute adds
    # no all-gather: transformers checkpoints the layer's `forward`, not
    # `__call__`, so FSDP2's unshard hooks run once, outside the checkpoint
    # (transformers/modeling_layers.py, GradientCheckpointingLayer.__init_subclass__).
    if training.activation_checkpointing and not training.activation_checkpointing_kwargs:
        training.activation_checkpointing_kwargs = {"use_reentrant": False}
        training.gradient_checkpointing_kwargs = training.activation_checkpointing_kwargs
    # The dataset is tokenized here with its own mask; TRL only builds labels from it.
    training.completion_only_loss = True
    training.dataset_kwargs = None
    # The Trainer would name the Hub repository after the output directory,
    # which in the cluster is a mount point; name it after the model instead.
    if training.push_to_hub and not training.hub_model_id:
        training.hub_model_id = f"{os.path.basename(script.model_id.rstrip('/'))}-finetuned"
    # tokens/s counts real tokens, padding excluded.
    if training.include_num_input_tokens_seen in ("no", False):
        training.include_num_input_tokens_seen = "non_padding"
    # The TensorBoard callback reads its directory from this variable (transformers 5).
    logging_dir = script.logging_dir or os.path.join(training.output_dir, "tensorboard")
    os.environ["TENSORBOARD_LOGGING_DIR"] = logging_dir
    script.logging_dir = logging_dir
