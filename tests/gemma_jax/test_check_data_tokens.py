"""`make check-data` counts the tokens the JAX trainer trains on: the platform's `tokenizers` library on
the Hugging Face tokenizer of Gemma 3 270M, with the trainer's default Gemma 3 template, gives the same
ids and loss mask as the trainer's own tokenization (trainers/gemma_jax/examples.py tokenize_example) with
gemma's SentencePiece tokenizer on the same GGUF vocabulary, for each format and loss."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

import real_weights
from gemma_jax_helpers import REPO
from trainers.gemma_jax import examples
from trainers.sft_data import formats, parts

pytestmark = pytest.mark.slow

CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello.\n\tindented"}, {"role": "user", "content": "And?"},
        {"role": "assistant", "content": "def f():\n        return 1"}]
CASES = [
    ({"text": "The sky is blue.\n    Indented."}, {"data_format": "text"}),
    ({"prompt": "The sky is", "completion": " blue."}, {"data_format": "prompt-completion"}),
    ({"prompt": "Translate: hi", "completion": "salut"}, {"data_format": "prompt-completion", "system_prompt": "Go."}),
    ({"messages": CHAT}, {"data_format": "conversational"}),
    ({"messages": CHAT}, {"data_format": "conversational", "loss_on": "all"}),
]  # fmt: skip

# check-data's tokenization, in the platform's environment (.venv: `tokenizers`, which .venv-jax lacks).
_CHECK_DATA = """
import json, sys
from pathlib import Path
from tools.data import tokens
from trainers.sft_data import formats
out = []
for record, settings in json.loads(sys.argv[2]):
    spec = formats.Spec.of(settings["data_format"], "", None, settings.get("system_prompt"), settings.get("loss_on", "completion"))
    tok, _ = tokens.load(Path(sys.argv[1]), None, "gemma3", spec.format)
    out.append(tok.tokens_of_many([tok.example(spec, formats.read_record(spec, record, 1), 1)])[0])
print(json.dumps(out))
"""


def _spec(settings: dict) -> formats.Spec:
    return formats.Spec.of(settings["data_format"], "", None, settings.get("system_prompt"),
                           settings.get("loss_on", "completion"))


@pytest.fixture(scope="module")
def check_data():
    python = os.path.join(REPO, ".venv", "bin", "python")
    assert os.path.exists(python), f"{python} is missing: check-data runs in the platform's environment (make .venv/.installed)"
    done = subprocess.run([python, "-c", _CHECK_DATA,
                           real_weights.cached_hf_tokenizer(), json.dumps(CASES)],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def gemma3():
    from gemma import gm  # pylint: disable=g-import-not-at-top

    tokenizer = gm.text.Gemma3Tokenizer(real_weights.cached_sentencepiece())
    return tokenizer, examples.template_factory(formats.Spec.of("conversational"), "gemma3")(tokenizer)


@pytest.mark.parametrize("index", range(len(CASES)), ids=lambda i: f"{CASES[i][1]}")
def test_check_data_tokenizes_as_the_jax_trainer(check_data, gemma3, index):
    tokenizer, template = gemma3
    record, settings = CASES[index]
    example = parts.example(_spec(settings), record, template.render, 1)
    ids, mask = examples.tokenize_example(example, tokenizer)
    assert check_data[index] == [ids.tolist(), [bool(m) for m in mask]]
