"""Fixtures for the JAX trainer tests: generated stories, a tokenizer trained
here, and a locally saved tiny Gemma checkpoint."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import tempfile

import pytest

from gemma_jax_helpers import REPO, cpu_env, make_story, write_tinystories

# Most tests start the trainer several times on the same tiny shapes; JAX's persistent compilation
# cache lets a start reuse what an earlier one compiled instead of compiling it again
# (https://docs.jax.dev/en/latest/persistent_compilation_cache.html: enabled by
# JAX_COMPILATION_CACHE_DIR, every compile cached with a minimum compile time of 0). The programs
# are the same; only their compile time goes. One folder for the test session, its xdist workers
# and every trainer process they start (they inherit the environment, cpu_env), removed at the end.
_CACHE_ENV = "JAX_COMPILATION_CACHE_DIR"


def pytest_configure(config):
    if hasattr(config, "workerinput") or os.environ.get(_CACHE_ENV):
        return  # an xdist worker inherits the controller's; a folder given outside is kept as given
    config.jax_cache = tempfile.mkdtemp(prefix="gke-finetune-jax-cache-")
    os.environ[_CACHE_ENV] = config.jax_cache
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"


def pytest_unconfigure(config):
    if getattr(config, "jax_cache", None):
        shutil.rmtree(config.jax_cache, ignore_errors=True)


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


# Seconds per test file (setups, calls, teardowns), rounded from a measured run (`make test-jax
# PYTEST_ARGS=--durations=0`, two workers, the environments cached); they only order the files
# (tests/support/xdist_order.py).
FILE_SECONDS = {
    "test_real_weights.py": 350, "test_train.py": 160, "test_resume.py": 100, "test_gemma4_lora.py": 85,
    "test_sft_data.py": 85, "test_multihost.py": 75, "test_compiled_hbm.py": 75, "test_hf_gemma4.py": 65,
    "test_data_mix.py": 45, "test_multihost_agreement.py": 40, "test_export.py": 35, "test_memory.py": 35,
    "test_token_shards.py": 30, "test_pretrained.py": 15, "test_data.py": 12, "test_real_tokenizer.py": 6,
    "test_check_data_tokens.py": 6, "test_flops.py": 3,
}


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` (make test-jax's), the longest file first: the real-weight file (Gemma 3 270M, minutes
    per test) starts at once on one worker while the other takes the rest, and no file queues behind it."""
    from tests.support.xdist_order import files_longest_first  # pylint: disable=g-import-not-at-top

    return files_longest_first(config, log, "tests/gemma_jax", FILE_SECONDS, default_test_seconds=2)
