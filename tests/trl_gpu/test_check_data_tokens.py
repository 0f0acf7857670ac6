"""`make check-data` counts the tokens the GPU trainer trains on: its tokenizer (the `tokenizers` library on
tokenizer.json, in the platform's environment) and its template give the same input ids and trained
positions as the trainer's own tokenization through transformers (trainers/trl_gpu/data.py
tokenize_example), on the real Gemma 3 tokenizer with TRL's Gemma 3 template."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import AutoTokenizer

from tests.support.weights_cache import cached_hf_tokenizer
from tools.data import tokens
from trainers.sft_data import formats
from trainers.trl_gpu import data, templates

CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello.\n\tindented"}, {"role": "user", "content": "And?"},
        {"role": "assistant", "content": "def f():\n        return 1"}]


@pytest.fixture(scope="module")
def directory():
    return cached_hf_tokenizer()


@pytest.fixture(scope="module")
def trainer_tokenizer(directory):
    tok = AutoTokenizer.from_pretrained(directory)
    tok.chat_template = templates.resolve("gemma3")  # what --chat_template gemma3 gives the trainer: TRL's
    return tok


@pytest.mark.parametrize("record, spec", [
    ({"text": "The sky is blue.\n    Indented."}, formats.Spec.of("text")),
    ({"prompt": "The sky is", "completion": " blue."}, formats.Spec.of("prompt-completion")),
    ({"prompt": "The sky is", "completion": " blue."}, formats.Spec.of("prompt-completion", loss_on="all")),
    ({"prompt": "Translate: hi", "completion": "salut"}, formats.Spec.of("prompt-completion", system_prompt="Go.")),
    ({"messages": CHAT}, formats.Spec.of("conversational")),
    ({"messages": CHAT}, formats.Spec.of("conversational", loss_on="all")),
])  # fmt: skip
def test_check_data_tokenizes_as_the_gpu_trainer(directory, trainer_tokenizer, record, spec):
    tok, _ = tokens.load(Path(directory), None, "gemma3", spec.format)
    example = tok.example(spec, formats.read_record(spec, record, 1), 1)
    ids, trained = tok.tokens(example)
    assert tok.tokens_of_many([example, example]) == [(ids, trained)] * 2  # the batched path check-data takes
    theirs = data.tokenize_example(record, trainer_tokenizer, spec)
    assert ids == theirs["input_ids"]
    assert trained == [label != data.IGNORE_INDEX for label in theirs["labels"]]
    assert any(trained) and (spec.loss_on == "all" or not all(trained[1:]) or spec.format == "text")
