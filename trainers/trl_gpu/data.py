"""Text-to-SQL data: load, split with a fixed seed, build chats, tokenize.

Each row becomes a system + user prompt (schema and question) and an
assistant answer (the SQL). The tokenized example is what inference sees
and must produce: the generation prompt (with whatever the template prints
there, such as Gemma 4 31B's empty thought block), then the SQL and the
template's end-of-turn marker (templates.split_turn). Its `labels` are -100
on every prompt token. The mask is built here rather than by TRL's
`assistant_only_loss`, which rejects Gemma 4's chat templates, and it drops
the newline that Gemma templates print after the end-of-turn token, which
the model never has to produce at inference.
"""

from __future__ import annotations

import logging
import os

import datasets
from datasets import Dataset, load_dataset, load_from_disk

from . import templates
from .args import REQUIRED_COLUMNS, ConfigError
from .model import network_trouble

log = logging.getLogger(__name__)

IGNORE_INDEX = -100
_FILE_BUILDERS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet"}

SYSTEM_MESSAGE = (
    "You translate questions written in English into SQL. Answer with a single SQL query that runs "
    "against the SCHEMA you are given."
)
USER_TEMPLATE = (
    "Write the SQL query that answers <USER_QUERY> against <SCHEMA>, respecting the schema's tables, "
    "columns and types.\n\n<SCHEMA>\n{context}\n</SCHEMA>\n\n<USER_QUERY>\n{question}\n</USER_QUERY>\n"
)


def prompt_messages(row: dict) -> list[dict]:
    user = USER_TEMPLATE.format(context=row["sql_context"], question=row["sql_prompt"])
    return [{"role": "system", "content": SYSTEM_MESSAGE}, {"role": "user", "content": user}]


def _load_local(path: str, split: str) -> Dataset:
    if os.path.isfile(path):
        builder = _FILE_BUILDERS.get(os.path.splitext(path)[1].lower())
        if builder is None:
            raise ConfigError(f"--dataset_name={path!r}: unsupported file type; use one of {sorted(_FILE_BUILDERS)}")
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
    looks_local = os.path.isabs(name) or name.startswith(".") or os.path.splitext(name)[1] in _FILE_BUILDERS
    try:
        if os.path.exists(name):
            dataset = _load_local(name, split)
        elif looks_local:
            raise ConfigError(f"--dataset_name={name!r}: no such file or directory")
        else:
            dataset = load_dataset(name, split=split)
    except ConfigError:
        raise
    except (datasets.exceptions.DatasetNotFoundError, FileNotFoundError, ValueError, ConnectionError) as err:
        if network_trouble(err):
            raise  # the Hub is unreachable: a retry may work
        raise ConfigError(f"--dataset_name={name!r} (split {split!r}) could not be loaded: {err}") from err
    missing = [c for c in REQUIRED_COLUMNS if c not in dataset.column_names]
    if missing:
        raise ConfigError(
            f"--dataset_name={name!r} lacks column(s) {missing}; it has {dataset.column_names}, "
            f"and {list(REQUIRED_COLUMNS)} are required"
        )
    return dataset


def split_rows(dataset: Dataset, max_samples: int, eval_fraction: float, seed: int) -> tuple[Dataset, Dataset]:
    """Seeded shuffle, cap, then a seeded train/held-out split: every restart
    and every rank sees the same rows in the same order."""
    dataset = dataset.shuffle(seed=seed)
    if len(dataset) > max_samples:
        dataset = dataset.select(range(max_samples))
    parts = dataset.train_test_split(test_size=eval_fraction, seed=seed)
    return parts["train"], parts["test"]


def _ids(tokenizer, text: str) -> list[int]:
    # The rendered template already holds <bos>; apply_chat_template(tokenize=True)
    # tokenizes its rendering the same way, without adding special tokens.
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def tokenize_example(row: dict, tokenizer) -> dict:
    """input_ids: the generation prompt exactly as inference renders it, then
    the answer and the end-of-turn marker; labels train on the latter only."""
    prompt, completion = templates.split_turn(tokenizer, prompt_messages(row), row["sql"])
    prompt_ids, completion_ids = _ids(tokenizer, prompt), _ids(tokenizer, completion)
    return {
        "input_ids": prompt_ids + completion_ids,
        "labels": [IGNORE_INDEX] * len(prompt_ids) + completion_ids,
    }


def tokenize_split(dataset: Dataset, tokenizer, max_length: int | None, num_proc: int | None = None) -> Dataset:
    """Tokenize; drop (rather than cut) examples longer than max_length, so no
    trained answer loses its end-of-turn token."""
    if len(dataset):  # a template problem surfaces here as itself, not from inside map()
        tokenize_example(dataset[0], tokenizer)
    tokenized = dataset.map(
        tokenize_example,
        fn_kwargs={"tokenizer": tokenizer},
        remove_columns=dataset.column_names,
        num_proc=num_proc,
        desc="Tokenizing",
    )
    if max_length is not None:
        before = len(tokenized)
        tokenized = tokenized.filter(lambda ex: len(ex["input_ids"]) <= max_length, num_proc=num_proc)
        if len(tokenized) < before:
            log.warning("dropped %d of %d examples longer than --max_length=%d", before - len(tokenized), before, max_length)
    if len(tokenized) == 0:
        raise ConfigError(f"--max_length={max_length}: no example fits")
    return tokenized
