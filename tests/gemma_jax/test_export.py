"""A run's `export:` and `eval:` through the JAX trainer on CPU (the tiny Gemma 3 model): the export is
complete (its marker last), carries the tokenizer and chat template, eval.json compares with the
base, and transformers on the export computes what the trainer's own params compute
(real_weights.transformers_loss runs transformers in the GPU trainer's environment)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import real_weights
from gemma_jax_helpers import base_args, load_params, max_abs_diff, run_train

pytestmark = pytest.mark.slow
# The trainer computes in float32 here; transformers' Gemma 3 does the same sums in another order.
TOLERANCE = 1e-3
PROMPTS = ["Once upon a time", "The dog"]


@pytest.fixture(scope="module")
def exported(stories_file, tokenizer_file, tmp_path_factory):
    d = tmp_path_factory.mktemp("jax-export")
    kw = {"steps": 4, "save_every": 4, "eval_batches": 1, "export_hf": d / "export", "export_dtype": "float32",
          "eval_prompts": json.dumps(PROMPTS), "eval_max_new_tokens": 4}
    res = run_train(base_args(stories_file, tokenizer_file, d / "ckpt", d / "logs", **kw))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    inspect = run_train(base_args(stories_file, tokenizer_file, d / "i", d / "logs-i", inspect_batches=1,
                                  inspect_out=d / "b.npz"))
    assert inspect.returncode == 0, inspect.stdout[-2000:] + inspect.stderr[-2000:]
    return d


def test_the_export_is_complete_with_tokenizer_and_chat_template(exported):
    from trainers import export_dir  # pylint: disable=g-import-not-at-top

    marker = export_dir.read(str(exported / "export"))
    assert (marker["trainer"], marker["merge"], marker["dtype"], marker["step"]) == ("gemma-jax", True, "float32", 4)
    assert {"model.safetensors", "config.json", "tokenizer.model", "tokenizer_config.json", "chat_template.jinja",
            "eval.json"} <= set(marker["files"])
    assert "<start_of_turn>" in (exported / "export" / "chat_template.jinja").read_text()


def test_eval_json_has_the_held_out_loss_and_the_prompts_of_model_and_base(exported):
    body = json.loads((exported / "export" / "eval.json").read_text())
    assert body["trainer"] == "gemma-jax" and body["step"] == 4 and body["metric"] is None
    assert body["held_out_loss"]["model"] > 0 and body["held_out_loss"]["base"] > 0
    assert body["held_out_loss"]["model"] < body["held_out_loss"]["base"]  # 4 steps at 3e-3 from random weights
    assert [s["prompt"] for s in body["samples"]] == PROMPTS
    assert all(isinstance(s["model"], str) and isinstance(s["base"], str) for s in body["samples"])


def test_transformers_on_the_export_computes_the_trainer_s_loss(exported):
    from trainers.gemma_jax import model as model_lib, steps  # pylint: disable=g-import-not-at-top

    params = load_params(str(exported / "ckpt"), 4)
    vocab = params["embedder"]["input_embedding"].shape[0]
    model = model_lib.build_model("tiny", vocab, "float32", 0)
    b = np.load(exported / "b.npz")
    batch = {"tokens": b["input_tokens"][0], "segment_ids": b["segment_ids"][0], "positions": b["positions"][0]}
    total, count = steps.loss_terms(model, params, batch)
    loaded = real_weights.transformers_loss(str(exported / "export"), str(exported / "b.npz"))
    print(f"trainer {float(total) / float(count):.6f} transformers on the export {loaded['loss']:.6f}")
    assert abs(float(total) / float(count) - loaded["loss"]) <= TOLERANCE


def test_the_export_reads_the_params_and_leaves_the_optimizer_state_on_storage(exported, monkeypatch):
    """AdamW's two moments are twice the params' bytes: an export of a large run reads a third of the step."""
    import jax  # pylint: disable=g-import-not-at-top
    import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top

    from trainers.gemma_jax import export_hf  # pylint: disable=g-import-not-at-top

    read = []
    deserialize = ocp.type_handlers.ArrayHandler.deserialize

    async def recording(self, infos, args=None):
        read.extend(info.name for info in infos)
        return await deserialize(self, infos, args)

    monkeypatch.setattr(ocp.type_handlers.ArrayHandler, "deserialize", recording)
    step, params, _ = export_hf.read_step(str(exported / "ckpt"), None)
    monkeypatch.undo()
    assert step == 4 and read and all(name.startswith("params.") for name in read), read
    with ocp.StandardCheckpointer() as checkpointer:  # a full restore of the step: the same params
        whole = checkpointer.restore(str(exported / "ckpt" / "4" / "state"))
    assert "opt_state" in whole and max_abs_diff(params, jax.tree.map(np.asarray, whole["params"])) == 0
