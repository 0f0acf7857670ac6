"""Data: local sources, the seeded split, and the answer-only loss mask."""

from __future__ import annotations

import json

import pytest
from datasets import Dataset
from transformers import AutoTokenizer

from trainers.sft_data import formats, parts
from trainers.trl_gpu import data
from trainers.trl_gpu.args import ConfigError

from . import tiny
from .conftest import STYLE_FIXTURES

SQL = tiny.sql_spec()  # the shipped text-to-SQL run's data settings


@pytest.mark.parametrize("style", tiny.STYLES)
def test_loss_mask_covers_exactly_the_answer(style, request):
    model_dir = request.getfixturevalue(STYLE_FIXTURES[style])
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    row = tiny.sql_rows(1, seed=7)[0]
    example = data.tokenize_example(row, tokenizer, SQL)
    ids, labels = example["input_ids"], example["labels"]
    assert len(ids) == len(labels)

    trained = [t for t, lab in zip(ids, labels) if lab != data.IGNORE_INDEX]
    masked = [t for t, lab in zip(ids, labels) if lab == data.IGNORE_INDEX]
    # Labels equal the input ids where trained (the model shifts them itself).
    assert all(lab in (data.IGNORE_INDEX, t) for t, lab in zip(ids, labels))
    # The mask is one block: prompt first, then answer to the end.
    first = labels.index(next(lab for lab in labels if lab != data.IGNORE_INDEX))
    assert all(lab == data.IGNORE_INDEX for lab in labels[:first])
    assert all(lab != data.IGNORE_INDEX for lab in labels[first:])

    # Trained: the SQL and the end-of-turn token, nothing else.
    assert tokenizer.decode(trained) == row["sql"] + tiny.END_OF_TURN[style]
    # Masked: exactly what inference feeds the model, the generation prompt's
    # ids (system + user turns, the model-turn header and, 31B-style, the
    # empty thought block), so training and inference see the same context.
    prompt = parts.prompt_and_answer(SQL, row)[0]
    prompt_text = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    prompt_ids = tokenizer.apply_chat_template(prompt, tokenize=True, return_dict=True, add_generation_prompt=True)[
        "input_ids"
    ]
    assert ids[: len(prompt_ids)] == list(prompt_ids) and masked == list(prompt_ids)
    assert tokenizer.decode(masked) == prompt_text
    assert prompt_text.endswith(tiny.EMPTY_THOUGHT) == (style == "gemma4-31b")
    assert row["sql_context"] in prompt_text and row["sql_prompt"] in prompt_text
    assert row["sql"] not in prompt_text


def test_too_long_examples_are_dropped_not_cut(gemma4_dir):
    tokenizer = AutoTokenizer.from_pretrained(gemma4_dir)
    rows = Dataset.from_list(tiny.sql_rows(8))
    lengths = [len(data.tokenize_example(r, tokenizer, SQL)["input_ids"]) for r in rows]
    limit = sorted(lengths)[4]
    kept = data.tokenize_split(rows, tokenizer, max_length=limit, spec=SQL)
    assert len(kept) == sum(n <= limit for n in lengths)
    assert all(ex["labels"][-1] == tokenizer.convert_tokens_to_ids("<turn|>") for ex in kept)
    with pytest.raises(ConfigError, match="--max_length"):
        data.tokenize_split(rows, tokenizer, max_length=min(lengths) - 1, spec=SQL)


def test_the_tokenized_split_is_cached_under_what_decides_its_rows(gemma4_dir, gemma3_dir, tmp_path):
    """The split's fingerprint (its cache file's name, shared by the ranks and a restart) is the same for the same
    rows, settings and tokenizer loaded again, and changes with each of them; a file-backed split tokenized again
    under another template is tokenized anew, not read from the first one's cache."""
    rows = data.load_rows(str(tiny.write_dataset(tmp_path / "sql.jsonl", n=12)), "train")  # arrow files: cached
    tokenizer = AutoTokenizer.from_pretrained(gemma4_dir)
    first = data.tokenize_split(rows, tokenizer, max_length=None, spec=SQL)
    assert first._fingerprint == data.tokenized_fingerprint(rows, AutoTokenizer.from_pretrained(gemma4_dir), SQL)
    again = data.tokenize_split(rows, AutoTokenizer.from_pretrained(gemma4_dir), max_length=None, spec=SQL)
    assert again._fingerprint == first._fingerprint and again["input_ids"] == first["input_ids"]
    other_rows = Dataset.from_list(tiny.sql_rows(12, seed=1))
    other_spec = formats.Spec.of("prompt-completion", {"prompt": "sql_prompt", "completion": "sql"})
    assert len({first._fingerprint, data.tokenized_fingerprint(other_rows, tokenizer, SQL),
                data.tokenized_fingerprint(rows, tokenizer, other_spec),
                data.tokenized_fingerprint(rows, AutoTokenizer.from_pretrained(gemma3_dir), SQL)}) == 4
    retemplated = AutoTokenizer.from_pretrained(gemma4_dir)
    retemplated.chat_template = tiny.chat_template("gemma4-31b")  # the same vocabulary, another template
    changed = data.tokenize_split(rows, retemplated, max_length=None, spec=SQL)
    assert changed._fingerprint != first._fingerprint
    assert changed["input_ids"] == [data.tokenize_example(r, retemplated, SQL)["input_ids"] for r in rows]
    assert changed["input_ids"] != first["input_ids"]


def test_split_is_seeded_and_capped():
    rows = Dataset.from_list(tiny.sql_rows(100))
    train_a, held_a = data.split_rows(rows, max_samples=50, eval_fraction=0.2, seed=42)
    train_b, held_b = data.split_rows(rows, max_samples=50, eval_fraction=0.2, seed=42)
    train_c, _ = data.split_rows(rows, max_samples=50, eval_fraction=0.2, seed=43)
    assert (len(train_a), len(held_a)) == (40, 10)
    assert train_a["id"] == train_b["id"] and held_a["id"] == held_b["id"]
    assert train_a["id"] != train_c["id"]
    assert not set(train_a["id"]) & set(held_a["id"])


@pytest.mark.parametrize("kind", ["jsonl", "csv", "parquet", "saved", "hub-layout"])
def test_local_sources(tmp_path, kind):
    rows = tiny.sql_rows(12)
    ds = Dataset.from_list(rows)
    if kind == "jsonl":
        path = tmp_path / "d.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif kind == "csv":
        path = tmp_path / "d.csv"
        ds.to_csv(str(path))
    elif kind == "parquet":
        path = tmp_path / "d.parquet"
        ds.to_parquet(str(path))
    elif kind == "saved":
        path = tmp_path / "saved"
        ds.save_to_disk(str(path))
    else:  # a directory of data files, as a Hub dataset repository is laid out
        path = tmp_path / "repo"
        (path / "data").mkdir(parents=True)
        ds.to_parquet(str(path / "data" / "train-00000-of-00001.parquet"))
    loaded = data.load_rows(str(path), "train")
    assert len(loaded) == 12 and loaded[0]["sql"] == rows[0]["sql"]


def test_missing_column_names_the_column_and_the_row(tmp_path):
    path = tmp_path / "d.jsonl"
    rows = tiny.sql_rows(3)
    del rows[2]["sql_context"]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ConfigError) as err:
        data.check_rows(data.load_rows(str(path), "train"), SQL, str(path))
    assert "row 3: column 'sql_context' is missing" in str(err.value) and "--dataset_name" in str(err.value)


def test_missing_local_file_and_unknown_hub_dataset(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        data.load_rows(str(tmp_path / "absent.jsonl"), "train")
    with pytest.raises(ConfigError, match="--dataset_name"):
        data.load_rows("nobody/no-such-dataset", "train")  # offline in the tests


# The text-to-SQL recipe as the trainer built it before it took data settings (its data.py and
# templates.py `split_turn` at 4b21eeb), kept here as the reference the shipped a4 run's settings
# must reproduce token for token: the same ids and labels give the same loss curve and the same
# generations, so the run's figures (exec accuracy, loss) are the former recipe's.
_FORMER_SYSTEM = ("You translate questions written in English into SQL. Answer with a single SQL query that runs "
                  "against the SCHEMA you are given.")
_FORMER_USER = ("Write the SQL query that answers <USER_QUERY> against <SCHEMA>, respecting the schema's tables, "
                "columns and types.\n\n<SCHEMA>\n{context}\n</SCHEMA>\n\n<USER_QUERY>\n{question}\n</USER_QUERY>\n")


def _former_recipe(row: dict, tokenizer) -> dict:
    messages = [{"role": "system", "content": _FORMER_SYSTEM},
                {"role": "user", "content": _FORMER_USER.format(context=row["sql_context"], question=row["sql_prompt"])}]
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    full = tokenizer.apply_chat_template([*messages, {"role": "assistant", "content": row["sql"]}], tokenize=False)
    content = row["sql"].strip()
    start = full.rfind(content)
    assert start >= 0 and prompt.startswith(full[:start])
    completion = content + full[start + len(content):].rstrip()
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    completion_ids = tokenizer(completion, add_special_tokens=False)["input_ids"]
    return {"input_ids": prompt_ids + completion_ids, "labels": [data.IGNORE_INDEX] * len(prompt_ids) + completion_ids}


@pytest.mark.parametrize("style", tiny.STYLES)
def test_the_shipped_text_to_sql_settings_give_the_former_recipe_s_ids_and_labels(style, request):
    tokenizer = AutoTokenizer.from_pretrained(request.getfixturevalue(STYLE_FIXTURES[style]))
    for index, row in enumerate(tiny.sql_rows(16, seed=3)):
        assert data.tokenize_example(row, tokenizer, SQL, index) == _former_recipe(row, tokenizer), (style, index)
