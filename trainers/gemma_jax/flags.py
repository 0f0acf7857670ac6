"""The trainer's flags, declared once; standard library only (Python >= 3.11).

`Flags` is the single declaration: each field's type, default, help, allowed
values and minimum. The argparse parser (`build_parser`) is derived from it,
and so is `argument_problems`, which the platform calls (in its own Python
3.11 environment, without jax or gemma) to check a run's `args:` before
anything is declared. Checks that need the model registry or the file system
stay in cli.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import os
import typing
from collections.abc import Callable, Sequence

from trainers.eval_report import METRICS as EVAL_METRICS
from trainers.export_dir import DTYPES as EXPORT_DTYPES
from trainers.sft_data import formats

PROG = "python -m trainers.gemma_jax.train"
SAMPLE_PROMPT = "Once upon a time, there was a girl named Amy."
# The keys of model.MODELS (tests/gemma_jax/test_flags.py checks they agree).
MODEL_NAMES = (
    "gemma3-270m",
    "gemma3-1b",
    "gemma3-4b",
    "gemma3-12b",
    "gemma3-27b",
    "gemma4-e2b",
    "gemma4-e4b",
    "gemma4-31b",
    "gemma4-26b-a4b",
    "tiny",
    "tiny-gemma4",
)
SEED_MAX = 2**63 - 1  # jax.random.key takes a 64-bit seed

def flag(default, help: str, **meta):  # pylint: disable=redefined-builtin
    """A field carrying its flag's metadata: help, and optionally choices,
    minimum (inclusive), above (exclusive minimum), maximum, env (default
    read from that environment variable), parse (str -> value), metavar,
    bare (value of the flag given without a value)."""
    return dataclasses.field(default=default, metadata={"help": help, **meta})


@dataclasses.dataclass(frozen=True)
class Flags:
    """Every flag of the trainer; defaults follow the GKE tutorial where it has one."""

    # Model.
    model: str = flag("gemma3-270m", "model size", choices=MODEL_NAMES)
    tokenizer: str | None = flag(None, "SentencePiece .model (default: the model's gemma one)")
    pretrained: str | None = flag(
        "default",
        "Orbax params checkpoint; 'default' = the model's _PT checkpoint, 'none' = random init",
    )
    init_from_hf: str | None = flag(
        None,
        "start from a Hugging Face Gemma 3/4 text checkpoint directory "
        "(config.json + safetensors) instead of --pretrained",
    )
    lora_rank: int = flag(0, "LoRA adapter rank; 0 = full fine-tune", minimum=0)
    param_dtype: str = flag(
        "bfloat16", "dtype the model computes in", choices=("bfloat16", "float32")
    )
    master_dtype: str = flag(
        "float32", "dtype of the trained weights kept by the optimizer", choices=("float32", "bfloat16")
    )
    # Data.
    data_path: str = flag("/data/TinyStories-train.txt",
                          "stories separated by <|endoftext|>, a token-shard directory (token_shards.py), or "
                          "data files (.jsonl .json .csv .parquet .txt, or a directory of them)")
    data_format: str = flag("text", "what a record holds: text, conversational (messages) or prompt-completion",
                            choices=formats.FORMATS)
    columns: str = flag("", "the file's names of the format's standard columns, e.g. prompt=question,completion=answer",
                        parse="columns")
    prompt_template: str | None = flag(
        None, "prompt-completion: build the prompt from the record's columns ({column} fields), as the user's turn "
        "of a chat whose assistant turn is the completion")
    system_prompt: str | None = flag(None, "a system turn before every chat")
    loss_on: str = flag("completion", "completion: only the assistant's turns or the completion carry loss; "
                        "all: every token", choices=formats.LOSS_ON)
    data_mix: str | None = flag(
        None, "several datasets mixed by weight, each with its own format: a JSON list of {path, weight, format, "
        "columns, prompt_template, system_prompt} (trainers/sft_data/mixture.py); replaces --data_path and the "
        "data settings but --loss_on")
    chat_template: str | None = flag(
        None, "gemma3 | gemma4 | gemma4-31b, a .jinja file or a model directory (default: --init_from_hf's own "
        "template, else the model family's)")
    datacount: int = flag(296000, "training stories or records (after the held-out ones)", minimum=1)
    eval_stories: int = flag(512, "stories or records at the head of the data held out for eval", minimum=0)
    maxlen: int = flag(256, "packed row length (tokens)", minimum=8)
    batch_size: int = flag(128, "global batch, in rows", minimum=1)
    data_workers: int = flag(4, "grain worker processes that tokenize (0 = in-process)", minimum=0)
    data_shards: int = flag(0, "data shards (0 = one per process)", minimum=0)
    inspect_batches: int = flag(
        0, "write the first N batches of this process to --inspect_out and exit", minimum=0
    )
    inspect_out: str = flag("", "the .npz file --inspect_batches writes")
    # Schedule.
    epochs: int = flag(1, "passes over the training stories", minimum=1)
    steps: int = flag(0, "stop after this many steps (0 = when the epochs are consumed)", minimum=0)
    learning_rate: float = flag(2e-5, "AdamW learning rate", above=0.0)
    warmup_steps: int = flag(0, "linear warmup steps", minimum=0)
    seed: int = flag(42, "data order and random init", minimum=0, maximum=SEED_MAX)
    # Parallelism.
    fsdp: int = flag(
        1,
        "shard params/optimizer over N devices (bare flag = all devices of a slice; 1 = replicated)",
        parse="fsdp",
        bare=-1,
        metavar="N",
    )
    distributed: str = flag("auto", "jax.distributed.initialize()", choices=("auto", "on", "off"))
    coordinator_address: str | None = flag(None, "host:port", env="JAX_COORDINATOR_ADDRESS")
    num_processes: int | None = flag(None, "processes", env="JAX_NUM_PROCESSES", minimum=1)
    process_id: int | None = flag(None, "this process", env="JAX_PROCESS_ID", minimum=0)
    # Checkpoints and export.
    checkpoint_dir: str = flag("checkpoints", "run-unique checkpoint directory")
    save_every: int = flag(200, "steps between checkpoints", minimum=1)
    keep_checkpoints: int = flag(3, "checkpoints kept", minimum=1)
    export_hf: str | None = flag(None, "after training, write a Hugging Face model directory here, its "
                                 "completion marker last (trainers/export_dir.py)")
    export_dtype: str = flag("float32", "--export_hf: the weights' dtype", choices=EXPORT_DTYPES)
    # eval.json beside the export (trainers/eval_report.py): the held-out loss and these prompts'
    # generations, of the trained model and of the one the run started from.
    eval_prompts: str | None = flag(None, "--export_hf: prompts to generate for eval.json, as a JSON list")
    eval_max_new_tokens: int = flag(256, "eval.json: tokens generated per prompt", minimum=1)
    eval_compare_base: str = flag("true", "eval.json: the base model's loss and generations too",
                                  choices=("true", "false"))
    eval_metric: str = flag("auto", "eval.json: task metric (this trainer computes none)", choices=EVAL_METRICS)
    # Observability.
    log_dir: str = flag("logs", "TensorBoard event files and XProf traces")
    log_every: int = flag(10, "steps between train log lines", minimum=1)
    eval_every: int = flag(200, "steps between evals (0 = before and after training only)", minimum=0)
    eval_batches: int = flag(0, "eval batches (0 = the whole held-out set)", minimum=0)
    peak_flops_per_device: float = flag(0.0, "peak bf16 FLOP/s of one device; 0 = no MFU", minimum=0.0)
    profile_steps: tuple[int, int] | None = flag(
        None, "trace steps START:END into --log_dir", parse="span", metavar="START:END"
    )
    xprof_port: int = flag(0, "profiler server port (0 = off)", minimum=0, maximum=65535)
    log_samples: bool = flag(False, "write the story ids of every step to <log_dir>/samples-*.jsonl")
    sample_prompt: str = flag(SAMPLE_PROMPT, "prompt sampled before and after training")
    sample_tokens: int = flag(32, "tokens sampled before and after training (0 = skip)", minimum=0)


def _fsdp(text: str) -> int:
    value = int(text)
    if value == 0 or value < -1:
        raise ValueError("use -1 (all devices), 1 or N > 1")
    return value


def _span(text: str) -> tuple[int, int]:
    try:
        start, end = (int(x) for x in text.split(":"))
    except ValueError:
        raise ValueError("expected START:END, e.g. 10:15") from None
    if not 0 < start <= end:
        raise ValueError("need 0 < START <= END")
    return start, end


def _columns(text: str) -> str:
    formats.parse_columns(text)  # ValueError names what is wrong
    return text


_PARSERS: dict[str, Callable[[str], object]] = {"fsdp": _fsdp, "span": _span, "columns": _columns}
_TYPE_NAMES = {int: "an int", float: "a number", str: "a string"}


@functools.cache
def _hints() -> dict:
    return typing.get_type_hints(Flags)


def _base_type(field: dataclasses.Field) -> type:
    hint = _hints()[field.name]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if args and typing.get_origin(hint) is not tuple else hint


def convert(field: dataclasses.Field, text: str):
    """The value of `text` for this flag; ValueError names what is wrong."""
    meta = field.metadata
    if "parse" in meta:
        return _PARSERS[meta["parse"]](text)
    kind = _base_type(field)
    try:
        value = kind(text)
    except ValueError:
        raise ValueError(f"{text!r} is not {_TYPE_NAMES[kind]}") from None
    if "choices" in meta and value not in meta["choices"]:
        raise ValueError(f"{text!r} is not one of {', '.join(meta['choices'])}")
    if "minimum" in meta and value < meta["minimum"]:
        raise ValueError(f"{text} is below the minimum {meta['minimum']}")
    if "above" in meta and not value > meta["above"]:
        raise ValueError(f"{text} must be > {meta['above']}")
    if "maximum" in meta and value > meta["maximum"]:
        raise ValueError(f"{text} is above the maximum {meta['maximum']}")
    return value


def _argparse_type(field: dataclasses.Field):
    def parse(text: str):
        try:
            return convert(field, text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    parse.__name__ = field.name
    return parse


def default_of(field: dataclasses.Field):
    env = field.metadata.get("env")
    if env and os.environ.get(env):
        return convert(field, os.environ[env])
    return field.default


def is_switch(field: dataclasses.Field) -> bool:
    return _base_type(field) is bool


def _help(field: dataclasses.Field) -> str:
    meta, text = field.metadata, field.metadata["help"]
    if "choices" in meta:
        text += f" ({'|'.join(meta['choices'])})"
    if "env" in meta:
        text += f"; default ${meta['env']}"
    return text + " (default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    """Raises instead of printing and exiting, so callers decide what to do."""

    def error(self, message):
        raise ValueError(message)


def build_parser(raise_errors: bool = False) -> argparse.ArgumentParser:
    """The argparse parser, derived from `Flags`. Abbreviations are refused
    (argparse would otherwise take --batch_siz for --batch_size)."""
    cls = _Parser if raise_errors else argparse.ArgumentParser
    p = cls(prog=PROG, description="Fine-tune Gemma on TinyStories with JAX.", allow_abbrev=False)
    for field in dataclasses.fields(Flags):
        name = f"--{field.name}"
        if is_switch(field):
            p.add_argument(name, action="store_true", help=field.metadata["help"])
            continue
        kwargs = {"type": _argparse_type(field), "default": default_of(field), "help": _help(field)}
        if "bare" in field.metadata:
            kwargs.update(nargs="?", const=field.metadata["bare"])
        kwargs["metavar"] = field.metadata.get("metavar", field.name.upper())
        p.add_argument(name, **kwargs)
    return p


@functools.cache
def _strict_parser() -> argparse.ArgumentParser:
    """One parser for argument_problems (parse_args keeps no state)."""
    return build_parser(raise_errors=True)


def parse(argv: Sequence[str] | None = None) -> Flags:
    """Flags from argv; ValueError with the parser's message on bad input."""
    ns = build_parser(raise_errors=True).parse_args(argv)
    return Flags(**vars(ns))


_FIELDS = {f.name: f for f in dataclasses.fields(Flags)}
# argparse's own test for a token that is a negative number, not a flag.
_NEGATIVE_NUMBER = argparse.ArgumentParser()._negative_number_matcher  # pylint: disable=protected-access
_OPTIONS = {f"--{name}" for name in _FIELDS}


def _unknown(name: str) -> str:
    close = difflib.get_close_matches(name, [f"--{n}" for n in _FIELDS], n=1, cutoff=0.6)
    return f"{name}: unknown flag" + (f"; did you mean {close[0]}?" if close else "")


def _looks_like_flag(token: str) -> bool:
    """argparse reads '-x' as a flag unless it looks like a negative number
    (the parser defines no option that does)."""
    if not token.startswith("-") or token == "-":
        return False
    if token.partition("=")[0] in _OPTIONS:
        return True
    negative = _NEGATIVE_NUMBER
    return not negative.match(token) and " " not in token


def argument_problems(argv: Sequence[str]) -> list[str]:
    """One line per problem, each starting with the flag, e.g.
    "--max_len: unknown flag; did you mean --maxlen?", "--maxlen: 'abc' is
    not an int", "'stray': a value without a flag". Empty list: argv parses."""
    problems, i, argv = [], 0, list(argv)
    while i < len(argv):
        token = argv[i]
        i += 1
        if token == "--":
            problems.extend(f"{t!r}: a value without a flag" for t in argv[i:])
            break
        if not _looks_like_flag(token):
            problems.append(f"{token!r}: a value without a flag")
            continue
        if token in ("-h", "--help"):
            problems.append(f"{token}: prints the help and exits; not a run argument")
            continue
        name, eq, inline = token.partition("=")
        field = _FIELDS.get(name[2:]) if name.startswith("--") else None
        if field is None:
            problems.append(_unknown(name))
            if not eq and i < len(argv) and not _looks_like_flag(argv[i]):
                i += 1  # its value goes with it
            continue
        if is_switch(field):
            if eq:
                problems.append(f"{name}: takes no value (got {inline!r})")
            continue
        if eq:
            value = inline
        elif i < len(argv) and not _looks_like_flag(argv[i]):
            value, i = argv[i], i + 1
        elif "bare" in field.metadata:
            continue
        else:
            problems.append(f"{name}: missing value")
            continue
        try:
            convert(field, value)
        except ValueError as e:
            problems.append(f"{name}: {e}")
    if not problems:  # anything argparse refuses that the walk above missed
        try:
            _strict_parser().parse_args(argv)
        except ValueError as e:
            problems.append(str(e))
    return problems
