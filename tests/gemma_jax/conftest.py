"""Fixtures for the JAX trainer tests: generated stories, a tokenizer trained
here, and a locally saved tiny Gemma checkpoint."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from gemma_jax_helpers import REPO, cpu_env, make_story, write_tinystories


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("gemma_jax")


@pytest.fixture(scope="session")
def stories_file(workdir) -> str:
    r = random.Random(1234)
    stories = [make_story(r, r.randint(1, 14)) for _ in range(3000)]
    path = str(workdir / "TinyStories-train.txt")
    write_tinystories(path, stories)
    return path


@pytest.fixture(scope="session")
def tokenizer_file(workdir) -> str:
    """A SentencePiece model laid out like Gemma's: pad=0 eos=1 bos=2 unk=3."""
    import sentencepiece as spm  # pylint: disable=g-import-not-at-top

    r = random.Random(99)
    corpus = [make_story(r, r.randint(1, 10)) for _ in range(500)]
    prefix = str(workdir / "tok")
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus),
        model_prefix=prefix,
        vocab_size=200,
        hard_vocab_limit=False,
        model_type="bpe",
        pad_id=0,
        eos_id=1,
        bos_id=2,
        unk_id=3,
        minloglevel=2,
    )
    return prefix + ".model"


@pytest.fixture(scope="session")
def pretrained_dir(workdir, tokenizer_file) -> str:
    """A tiny random Gemma 3 saved with gemma's own save_params (nested
    layout); the same params in gemma's stacked layout beside it."""
    path = str(workdir / "tiny_pretrained")
    code = (
        "import jax, jax.numpy as jnp\n"
        "from gemma import gm\n"
        "from trainers.gemma_jax import model as M\n"
        f"tok = M.load_tokenizer('tiny', {tokenizer_file!r})\n"
        "m = M.build_model('tiny', tok.vocab_size, 'bfloat16', 0)\n"
        "p = m.init(jax.random.key(7), jnp.zeros((1, 8), jnp.int32))['params']\n"
        f"gm.ckpts.save_params(p, {path!r}, wait_until_finished=True)\n"
        "from gemma.gm.ckpts import _checkpoint as C\n"
        f"gm.ckpts.save_params(C._nested_to_stacked(p, 1), {path + '_stacked'!r}, "
        "wait_until_finished=True)\n"
    )
    subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        check=True,
        env=cpu_env(1),
        capture_output=True,
        timeout=300,
    )
    return path


@pytest.fixture(scope="session")
def stacked_pretrained_dir(pretrained_dir) -> str:
    """The tiny Gemma 3 in gemma's stacked layout: both layers in one array
    per weight (a layer axis of 2, fewer than the 4 devices of an fsdp run)."""
    return pretrained_dir + "_stacked"
