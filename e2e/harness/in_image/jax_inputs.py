"""Tiny inputs for the JAX trainer's CPU run inside its image, made by the image's own Python.

    python jax_inputs.py DIR   ->  DIR/stories.txt (TinyStories' format), DIR/tok.model (SentencePiece)

Templated stories whose next tokens are learnable, and a 200-piece BPE
tokenizer laid out like Gemma's (pad 0, eos 1, bos 2, unk 3), as the JAX
trainer's own tests make them (tests/gemma_jax): nothing is downloaded.
"""

import random
import sys
from pathlib import Path

import sentencepiece as spm

NAMES = ["Amy", "Tom", "Lily", "Ben", "Sue", "Max", "Mia", "Sam"]
THINGS = ["ball", "cat", "dog", "tree", "cake", "box", "kite", "boat"]
MOODS = ["red", "blue", "happy", "sad", "big", "small"]


def story(r: random.Random, sentences: int) -> str:
    name, thing = r.choice(NAMES), r.choice(THINGS)
    out = [f"Once upon a time, there was a girl named {name}."]
    for _ in range(sentences):
        out.append(f"{name} liked the {r.choice(THINGS)}. The {thing} was {r.choice(MOODS)}.")
    out.append(f"{name} was happy.")
    return " ".join(out)


def main(out: Path) -> None:
    r = random.Random(1234)
    stories = [story(r, r.randint(1, 14)) for _ in range(3000)]
    (out / "stories.txt").write_text("\n<|endoftext|>\n".join(stories) + "\n<|endoftext|>\n", encoding="utf-8")
    corpus_rng = random.Random(99)
    corpus = [story(corpus_rng, corpus_rng.randint(1, 10)) for _ in range(500)]
    spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus), model_prefix=str(out / "tok"), vocab_size=200,
                                   hard_vocab_limit=False, model_type="bpe", pad_id=0, eos_id=1, bos_id=2,
                                   unk_id=3, minloglevel=2)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
