"""The run's data: load, check against its format, split with a fixed seed, tokenize with the loss mask.

Each record becomes text parts, each trained or not (trainers/sft_data/:
formats.py, text, conversational, prompt-completion, as TRL's SFTTrainer
documents them; parts.py). A chat is rendered with the model's chat template: its
last assistant turn follows the generation prompt exactly as inference
renders it (Gemma 4 31B's empty thought block included), and by default
only the assistant's turns, each with the end-of-turn marker the template
closes it with, carry loss (`--loss_on all`: every token). The mask is
built here rather than by TRL's `assistant_only_loss`, which rejects Gemma
4's chat templates, and it leaves out the newline Gemma templates print
after the end-of-turn token, which the model never has to produce at
inference. Plain text (format text, or a prompt-completion of strings
without a prompt template) is bracketed by BOS and EOS, the EOS trained.
"""

from __future__ import annotations

import logging
import os

import datasets
from datasets import Dataset, load_dataset, load_from_disk
from datasets.fingerprint import Hasher

from trainers.sft_data import formats, mixture, parts, records

from . import templates
from .args import ConfigError
from .model import network_trouble

log = logging.getLogger(__name__)

IGNORE_INDEX = -100
_FILE_BUILDERS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet"}
_TEXT_SUFFIX = ".txt"  # documents separated by <|endoftext|> (trainers/sft_data/records.py)


def _load_local(path: str, split: str) -> Dataset:
    if os.path.isfile(path):
        suffix = os.path.splitext(path)[1].lower()
        if suffix == _TEXT_SUFFIX:
            return Dataset.from_list(records.read_records(path))
        builder = _FILE_BUILDERS.get(suffix)
        if builder is None:
            raise ConfigError(f"--dataset_name={path!r}: unsupported file type; use one of "
                              f"{sorted([*_FILE_BUILDERS, _TEXT_SUFFIX])}")
        return load_dataset(builder, data_files=path, split="train")
    if os.path.exists(os.path.join(path, "dataset_dict.json")) or os.path.exists(
        os.path.join(path, "dataset_info.json")
    ):  # written by save_to_disk
        loaded = load_from_disk(path)
        if isinstance(loaded, datasets.DatasetDict):
            if split not in loaded:
                raise ConfigError(f"--dataset_split={split!r} not in {path!r}; it has {sorted(loaded)}")
            return loaded[split]
        return loaded
    return load_dataset(path, split=split)  # a directory of data files


def load_rows(name: str, split: str) -> Dataset:
    """Load the raw split from the Hub, a local file or a local directory."""
    suffixes = (*_FILE_BUILDERS, _TEXT_SUFFIX)
    looks_local = os.path.isabs(name) or name.startswith(".") or os.path.splitext(name)[1] in suffixes
    try:
        if os.path.exists(name):
            return _load_local(name, split)
        if looks_local:
            raise ConfigError(f"--dataset_name={name!r}: no such file or directory")
        return load_dataset(name, split=split)
    except ConfigError:
        raise
    except (datasets.exceptions.DatasetNotFoundError, FileNotFoundError, ValueError, ConnectionError) as err:
        if network_trouble(err):
            raise  # the Hub is unreachable: a retry may work
        raise ConfigError(f"--dataset_name={name!r} (split {split!r}) could not be loaded: {err}") from err


def check_rows(dataset: Dataset, spec: formats.Spec, name: str, flag: str = "--dataset_name") -> None:
    """The first rows against the run's format, before anything is tokenized (exit 78 naming the column,
    the row and what was expected); the rest are checked as they are tokenized."""
    head = dataset.select(range(min(formats.FIRST_ROWS, len(dataset))))
    try:
        formats.check_rows(spec, head, first=1)
    except formats.TemplateProblem as err:
        raise templates.problem(err) from None
    except formats.FormatError as err:
        raise ConfigError(f"{flag}={name!r} with --data_format {spec.format}: {err} "
                          f"(the file's columns: {dataset.column_names})") from None


def split_rows(dataset: Dataset, max_samples: int, eval_fraction: float, seed: int) -> tuple[Dataset, Dataset]:
    """Seeded shuffle, cap, then a seeded train/held-out split: every restart
    and every rank sees the same rows in the same order."""
    dataset = dataset.shuffle(seed=seed)
    if len(dataset) > max_samples:
        dataset = dataset.select(range(max_samples))
    split = dataset.train_test_split(test_size=eval_fraction, seed=seed)
    return split["train"], split["test"]


def _ids(tokenizer, text: str) -> list[int]:
    # A rendered template already holds <bos>; apply_chat_template(tokenize=True)
    # tokenizes its rendering the same way, without adding special tokens.
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def renderer(tokenizer) -> formats.Render:
    """The tokenizer's own chat template (transformers' rendering)."""

    def render(messages: list[dict], generation_prompt: bool, tools: list[dict] | None = None) -> str:
        return tokenizer.apply_chat_template(messages, tools=tools, tokenize=False,
                                             add_generation_prompt=generation_prompt)

    return render


def tokenize_example(row: dict, tokenizer, spec: formats.Spec, index: int = 0) -> dict:
    """input_ids and labels (IGNORE_INDEX where the token carries no loss) of one record."""
    example = parts.example(spec, row, renderer(tokenizer), row=index + 1)
    ids, trained = example.tokens(lambda text: _ids(tokenizer, text), tokenizer.bos_token_id, tokenizer.eos_token_id)
    return {"input_ids": ids, "labels": [i if loss else IGNORE_INDEX for i, loss in zip(ids, trained)]}


def _tokenize(row: dict, index: int, tokenizer, spec: formats.Spec) -> dict:
    try:
        return tokenize_example(row, tokenizer, spec, index)
    except formats.FormatError as err:
        raise templates.problem(err) from None


def tokenized_fingerprint(dataset: Dataset, tokenizer, spec: formats.Spec) -> str:
    """The tokenized split's fingerprint: its cache file's name, under which the other ranks (after the main
    process, main_process_first) and a restarted run find it. Without one, datasets hashes map()'s arguments
    as pickled objects, and pickling a Gemma tokenizer (a 262,144-piece vocabulary) takes seconds per split on
    every start; its serialized definition (vocabulary, merges, normalizer, added tokens), chat template and
    settings say the same in well under a second. Anything that changes the rows changes it: the source rows'
    fingerprint, the data settings, the tokenizer. (datasets' fingerprints and cache:
    https://huggingface.co/docs/datasets/about_cache; map's `new_fingerprint`: datasets/arrow_dataset.py
    Dataset.map, used as given instead of hashing the transform's arguments.)"""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    # A slow (Python) tokenizer has no serialized definition: hashed whole, as datasets would.
    definition = backend.to_str() if backend is not None else Hasher.hash(tokenizer)
    return Hasher.hash([dataset._fingerprint, "trainers.trl_gpu.data._tokenize", spec, type(tokenizer).__name__,
                        definition, tokenizer.chat_template, repr(tokenizer.init_kwargs)])


def tokenize_split(dataset: Dataset, tokenizer, max_length: int | None, spec: formats.Spec,
                   num_proc: int | None = None) -> Dataset:
    """Tokenize; drop (rather than cut) examples longer than max_length, so no
    trained answer loses its end-of-turn token."""
    if len(dataset):  # a template problem surfaces here as itself, not from inside map()
        _tokenize(dataset[0], 0, tokenizer, spec)
    tokenized = dataset.map(
        _tokenize,
        with_indices=True,
        fn_kwargs={"tokenizer": tokenizer, "spec": spec},
        remove_columns=dataset.column_names,
        num_proc=num_proc,
        desc="Tokenizing",
        new_fingerprint=tokenized_fingerprint(dataset, tokenizer, spec),
    )
    if max_length is not None:
        before = len(tokenized)
        tokenized = tokenized.filter(lambda ex: len(ex["input_ids"]) <= max_length, num_proc=num_proc)
        if len(tokenized) < before:
            log.warning("dropped %d of %d examples longer than --max_length=%d", before - len(tokenized), before, max_length)
    if len(tokenized) == 0:
        raise ConfigError(f"--max_length={max_length}: no example fits")
    return tokenized


def mixed_splits(script_args, seed: int, tokenizer, max_length: int | None, num_proc: int | None):
    """(train set, eval set, the first dataset's held-out rows, its spec) of --data_mix: each dataset loaded,
    checked, split and tokenized with its own settings as a single one is; the train sets interleaved by
    weight with datasets' interleave_datasets (probabilities, seed, stopping where the first runs out:
    no row repeated; datasets/combine.py), the held-out sets concatenated."""
    sources = mixture.parse(script_args.data_mix, script_args.loss_on)
    trains, evals, held_out = [], [], None
    for i, source in enumerate(sources):
        rows = load_rows(source.path, script_args.dataset_split)
        check_rows(rows, source.spec, source.path, flag=f"--data_mix source {i}")
        train_rows, eval_rows = split_rows(rows, script_args.max_samples, script_args.eval_fraction, seed)
        trains.append(tokenize_split(train_rows, tokenizer, max_length, source.spec, num_proc))
        evals.append(tokenize_split(eval_rows, tokenizer, max_length, source.spec, num_proc))
        held_out = eval_rows if held_out is None else held_out
        log.info("--data_mix source %d %s: %d train, %d held out", i, source.path, len(trains[-1]), len(evals[-1]))
    train = datasets.interleave_datasets(trains, probabilities=mixture.probabilities(sources), seed=seed,
                                         stopping_strategy=mixture.STOPPING)
    return train, datasets.concatenate_datasets(evals), held_out, sources[0].spec


def eval_spec(script_args) -> formats.Spec:
    """The settings of the held-out rows a generation check reads: --data_mix's first dataset's, else the run's."""
    if script_args.data_mix:
        return mixture.parse(script_args.data_mix, script_args.loss_on)[0].spec
    return formats.spec_of_flags(script_args)
