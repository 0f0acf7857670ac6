"""The SentencePiece model the JAX tests and benchmarks build from the Gemma 3 270M GGUF
(bench/real_tokenizer.py) against the Hugging Face tokenizer of the same weights, token for token:
indented code, tabs, runs of spaces and newlines, and every special marker the Hugging Face
tokenizer knows (the JAX trainer encodes a rendering with `encode_rendered`, which cuts it at the
control pieces first, as transformers splits out its special tokens)."""

from __future__ import annotations

import json
import subprocess

import pytest

import real_weights
from bench import real_tokenizer
from gemma_jax_helpers import REPO, cpu_env
from trainers.gemma_jax import examples

pytestmark = pytest.mark.slow

LONGEST_SPACE_RUN = 31  # Gemma's longest whitespace piece: ids 138..167 are 2..31 spaces

CODE = '''class Order:
    def ship(self, days):
        if days > 2:
            return  {"late": True,   "days": days}
        return None
'''
MAKEFILE = "all: build\n\tgo build ./...\n\t\t@echo done\t# tab, then a comment\n"
YAML = "runs:\n  - name: a\n    args: [--x,  \"1\"]\n      # deeper\n"
TEXTS = [
    CODE, MAKEFILE, YAML,
    "Once upon a time, there was a girl named Amy.",
    "Tom said: \"Wow!\" Ünïcode 🙂\n\nend",
    "  leading spaces", "trailing spaces   ", "tab\tthen spaces  \t  mixed", "\n\n\n   \n",
    *(f"x{' ' * n}y" for n in range(2, LONGEST_SPACE_RUN + 1)),
    *(f"x{chr(9) * n}y" for n in range(1, LONGEST_SPACE_RUN + 1)),
    *(f"{' ' * n}indented" for n in (2, 4, 8, 12, 16, 24, 31)),
]  # fmt: skip

_HF_IDS = """
import json, sys
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained(sys.argv[1])
texts = json.loads(open(sys.argv[2]).read())
markers = [t.content for _, t in sorted(tok.added_tokens_decoder.items())]
marked = " ".join(markers)
print(json.dumps({"ids": [tok(t, add_special_tokens=False)["input_ids"] for t in texts + [marked]],
                  "markers": markers, "special": sorted(tok.all_special_tokens)}))
"""


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """(gemma's tokenizer on the GGUF vocabulary, the Hugging Face tokenizer's answers)."""
    texts = tmp_path_factory.mktemp("texts") / "texts.json"
    texts.write_text(json.dumps(TEXTS))
    done = subprocess.run([real_weights.gpu_python(), "-c", _HF_IDS, real_weights.cached_hf_tokenizer(), str(texts)],
                          capture_output=True, text=True, timeout=600, cwd=REPO, env={**cpu_env(1), "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    hf = json.loads(done.stdout.strip().splitlines()[-1])
    from gemma import gm  # pylint: disable=g-import-not-at-top

    return gm.text.Gemma3Tokenizer(real_weights.cached_sentencepiece()), hf


@pytest.mark.parametrize("index", range(len(TEXTS)), ids=lambda i: repr(TEXTS[i][:24]))
def test_code_tabs_and_runs_of_spaces_tokenize_as_transformers_does(both, index):
    tokenizer, hf = both
    assert tokenizer.encode(TEXTS[index]) == hf["ids"][index]


def test_every_special_marker_is_its_id_as_transformers_splits_it(both):
    tokenizer, hf = both
    marked = " ".join(hf["markers"])
    assert len(hf["markers"]) > 6000  # control pieces, turn markers, image markers, whitespace and HTML pieces
    assert examples.encode_rendered(tokenizer, marked) == hf["ids"][-1]


def test_the_turn_markers_are_matched_in_text_and_the_control_pieces_are_not(both):
    """Gemma's own SentencePiece model matches its turn markers in text (gemma's sampler encodes prompts
    written with them); `<bos>` and `<eos>` are control pieces it never produces from text."""
    tokenizer, _ = both
    hi = tokenizer.encode("Hi")
    assert tokenizer.encode("<start_of_turn>user\nHi<end_of_turn>") == [105, *tokenizer.encode("user\n"), *hi, 106]
    assert 2 not in tokenizer.encode("<bos>") and 1 not in tokenizer.encode("<eos>")
    assert examples.encode_rendered(tokenizer, "<bos>x<eos>") == [2, tokenizer.encode("x")[0], 1]


def test_a_run_longer_than_the_longest_whitespace_piece():
    """SentencePiece matches user-defined pieces longest first: 40 spaces are the 31-space piece and the
    9-space one. transformers' GGUF reader gives Gemma's whitespace pieces back their spelling but not their
    user-defined type (transformers/integrations/gguf/gguf_tokenizer_mapping.py `gemma_tokenizer`, then
    `add_gguf_special_tokens` looks them up by the GGUF's spelling), so it merges them by rebuilt BPE merges
    instead (16 + 24 spaces here): the one place the two differ, only past 31 spaces in a row."""
    import sentencepiece as spm  # pylint: disable=g-import-not-at-top
    from sentencepiece import sentencepiece_model_pb2 as pb  # pylint: disable=g-import-not-at-top

    sp = spm.SentencePieceProcessor(model_file=real_weights.cached_sentencepiece())
    assert sp.EncodeAsPieces("x" + " " * 40 + "y") == ["x", "\u2581" * 31, "\u2581" * 9, "y"]
    proto = pb.ModelProto()
    with open(real_weights.cached_sentencepiece(), "rb") as f:
        proto.ParseFromString(f.read())
    longest = proto.pieces[167]
    assert longest.piece == "\u2581" * LONGEST_SPACE_RUN and longest.type == pb.ModelProto.SentencePiece.USER_DEFINED


def test_the_gguf_pieces_are_read_back_as_gemma_has_them():
    assert real_tokenizer.piece_and_type("   ", 4) == ("\u2581" * 3, 4)
    assert real_tokenizer.piece_and_type("<start_of_turn>", 3) == ("<start_of_turn>", 4)
    assert real_tokenizer.piece_and_type("<bos>", 3) == ("<bos>", 3)
    assert real_tokenizer.piece_and_type("\t\t", 4) == ("\t\t", 4)
    assert real_tokenizer.piece_and_type("\u2581the", 1) == ("\u2581the", 1)
