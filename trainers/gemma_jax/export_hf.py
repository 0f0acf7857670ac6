"""Writes a trained step as a Hugging Face model directory.

    python -m trainers.gemma_jax.export_hf --checkpoint_dir DIR --out OUT [--step N]

OUT gets config.json, model.safetensors (float32, or --dtype bfloat16) and
the tokenizer: the files of the Hugging Face directory the run started from
(--init_from_hf), else the run's SentencePiece model as tokenizer.model. The
step is the newest complete one unless --step is given; a LoRA step is merged
into its base first. Gemma 3 and dense Gemma 4 text models (KV-shared layers
included, hf_gemma4.py); other checkpoints exit 78 with the reason.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

from trainers import eval_report, exit_codes, export_dir

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "special_tokens_map.json")


class ExportError(Exception):
    """The checkpoint cannot be exported as asked (exit 78)."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m trainers.gemma_jax.export_hf", allow_abbrev=False)
    p.add_argument("--checkpoint_dir", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--step", type=int, default=None, help="default: the newest complete step")
    p.add_argument("--dtype", default="float32", choices=list(export_dir.DTYPES))
    return p


def read_step(checkpoint_dir: str, step: int | None):
    """(step, params as numpy, run metadata) of one saved step, on one device."""
    import jax  # pylint: disable=g-import-not-at-top
    import numpy as np  # pylint: disable=g-import-not-at-top

    directory = os.path.abspath(checkpoint_dir)
    steps = sorted(int(n) for n in os.listdir(directory) if n.isdigit()) if os.path.isdir(directory) else []
    if not steps:
        raise ExportError(f"--checkpoint_dir={checkpoint_dir}: no complete step")
    if step is None:
        step = steps[-1]
    elif step not in steps:
        raise ExportError(f"--step={step}: not among the complete steps {steps}")
    with open(os.path.join(directory, str(step), "meta", "metadata"), encoding="utf-8") as f:
        meta = json.load(f)
    params = restore_params(os.path.join(directory, str(step), "state"))
    return step, jax.tree.map(lambda x: np.asarray(x, np.float32), params), meta


def restore_params(path: str):
    """The params of one saved step's `state` folder, on this process's first device, as saved.

    Only this process restores (process 0 of a multi-host run): Orbax's default restore would wait for
    every process in a barrier (agree.py). The params alone are read: the optimizer's moments (twice the
    params' bytes for AdamW) stay on storage. A partial restore reads only the keys of `item`
    (orbax-checkpoint 0.12.8, pytree_checkpoint_handler.py `_get_restore_parameters`: with partial_restore
    the checkpoint's other keys are skip_deserialize)."""
    import jax  # pylint: disable=g-import-not-at-top
    import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top

    from trainers.gemma_jax import agree  # pylint: disable=g-import-not-at-top

    one = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    options = agree.lone_process_options()
    handler = ocp.PyTreeCheckpointHandler(multiprocessing_options=options)
    with ocp.Checkpointer(handler, multiprocessing_options=options) as ckptr:
        tree = ckptr.metadata(path).item_metadata.tree
        item = {"params": jax.tree.map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=one), tree["params"])}
        restored = ckptr.restore(path, args=ocp.args.PyTreeRestore(
            item=item, restore_args=ocp.checkpoint_utils.construct_restore_args(item), partial_restore=True))
    return restored["params"]


def _copy_tokenizer(meta: dict, out: str) -> None:
    source = (meta.get("export") or {}).get("init_from_hf")
    copied = []
    if source and os.path.isdir(source):
        for name in TOKENIZER_FILES:
            if os.path.isfile(os.path.join(source, name)):
                shutil.copy(os.path.join(source, name), out)
                copied.append(name)
    spm = (meta.get("export") or {}).get("tokenizer")
    if not copied:
        # The SentencePiece model the run tokenized with: its --tokenizer, else the model's gemma one
        # (wherever gemma reads it from), as the processor holds it.
        from trainers.gemma_jax import model as model_lib  # pylint: disable=g-import-not-at-top

        try:
            proto = model_lib.load_tokenizer(meta.get("model") or "tiny", spm)._sp.serialized_model_proto()  # pylint: disable=protected-access
        except Exception as e:  # pylint: disable=broad-except  # said as the export's own problem
            raise ExportError(f"no tokenizer to ship: {type(e).__name__}: {e}") from None
        with open(os.path.join(out, "tokenizer.model"), "wb") as f:
            f.write(proto)
        with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump({"tokenizer_class": "GemmaTokenizer", "bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"}, f)


def _write_chat_template(meta: dict, out: str) -> None:
    """The chat template the run trained with (its --chat_template, else --init_from_hf's own, else its
    model family's), as chat_template.jinja, which transformers' tokenizers load from the directory."""
    from trainers.sft_data import chat  # pylint: disable=g-import-not-at-top

    source_dir = (meta.get("export") or {}).get("init_from_hf")
    name = meta.get("chat_template")
    if name is None and source_dir and chat.model_dir_template(source_dir):
        name = source_dir
    if name is None:
        name = chat.family_template(meta.get("model") or "tiny")
    if name in chat.BUILT_IN:
        source = (chat.TEMPLATE_DIR / chat.BUILT_IN[name][0]).read_text(encoding="utf-8")
    elif os.path.isdir(name):
        source = chat.model_dir_template(name)
    else:
        with open(name, encoding="utf-8") as f:
            source = f.read()
    with open(os.path.join(out, "chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(source)


def _lora_base(meta: dict, model) -> dict:
    """The frozen base a LoRA step's adapters belong to, as numpy float32."""
    import jax  # pylint: disable=g-import-not-at-top
    import numpy as np  # pylint: disable=g-import-not-at-top

    from trainers.gemma_jax import hf  # pylint: disable=g-import-not-at-top
    from trainers.gemma_jax import model as model_lib  # pylint: disable=g-import-not-at-top
    from trainers.gemma_jax import pretrained  # pylint: disable=g-import-not-at-top

    base = meta.get("base")
    if not base:
        raise ExportError("a LoRA run on a random base (--pretrained none): no base to merge into")
    if base == (meta.get("export") or {}).get("init_from_hf"):
        _, tensors = hf.read_dir(base)
        return hf.codec(model.config).to_gemma(tensors, model.config, np.float32)
    from trainers.gemma_jax import agree  # pylint: disable=g-import-not-at-top

    abstract = model_lib.with_dtype(model_lib.abstract_params(model, 8), "float32")
    one = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    params = pretrained.load(base, abstract, jax.tree.map(lambda _: one, abstract),
                             multiprocessing_options=agree.lone_process_options())
    return jax.tree.map(np.asarray, params)


def export(checkpoint_dir: str, out: str, step: int | None = None, dtype: str = "float32",
           evaluated: dict | None = None) -> int:
    """Writes OUT, its completion marker last (trainers/export_dir.py), with `evaluated` as eval.json;
    returns the exported step. A LoRA step is merged into the base it was trained on (the run's
    recorded --pretrained or --init_from_hf)."""
    import ml_dtypes  # pylint: disable=g-import-not-at-top
    import numpy as np  # pylint: disable=g-import-not-at-top

    from trainers.gemma_jax import hf  # pylint: disable=g-import-not-at-top
    from trainers.gemma_jax import lora  # pylint: disable=g-import-not-at-top
    from trainers.gemma_jax import model as model_lib  # pylint: disable=g-import-not-at-top

    step, params, meta = read_step(checkpoint_dir, step)
    name = meta.get("model")
    vocab = _vocab_size(meta, params)
    model = model_lib.build_model(name, vocab, "float32", 0)
    codec = hf.codec(model.config)
    if codec is not hf and (problems := codec.config_problems(codec.hf_config(model.config, dtype), model.config)):
        raise ExportError(f"--model {name}: no transformers config matches it: " + "; ".join(problems))
    if meta.get("lora_rank"):
        params = lora.merge(_lora_base(meta, model), params)
    tensors = codec.from_gemma(params, model.config)
    if dtype != "float32":
        kind = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16
        tensors = {k: v.astype(kind) for k, v in tensors.items()}
    export_dir.begin(out)
    hf.write_safetensors(os.path.join(out, "model.safetensors"), tensors)
    with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(codec.hf_config(model.config, dtype), f, indent=2)
    _copy_tokenizer(meta, out)
    _write_chat_template(meta, out)
    if evaluated is not None:
        eval_report.write(out, evaluated)
    base = (meta.get("export") or {}).get("init_from_hf") or meta.get("base")
    export_dir.finish(out, {"trainer": "gemma-jax", "run": os.environ.get("GKE_FINETUNE_RUN") or None,
                            "format": "huggingface", "merge": True, "dtype": dtype, "base_model": base,
                            "model": name, "step": step})
    print(f"[export] step {step} of {checkpoint_dir} -> {out}", flush=True)
    return step


def export_from_run(checkpoint_dir: str, out: str, dtype: str = "float32", evaluated: dict | None = None) -> None:
    """The trainer's --export_hf: process 0 exports, every process waits for
    it and ends the same way.

    The other processes wait in a collective (agree.outcomes) until process 0
    is done, instead of exiting at once into jax.distributed's shutdown
    barrier, which times out after 5 minutes and aborts every process. An
    ExportError on process 0 is raised on all of them (exit 78 everywhere);
    any other failure there re-raises on process 0 and is a RuntimeError on
    the others (a retryable failure everywhere).
    """
    import jax  # pylint: disable=g-import-not-at-top

    from trainers.gemma_jax import agree  # pylint: disable=g-import-not-at-top

    code, error = _DONE, None
    if jax.process_index() == 0:
        try:
            export(checkpoint_dir, out, dtype=dtype, evaluated=evaluated)
        except ExportError as e:
            code, error = _REFUSED, e
        except Exception as e:  # pylint: disable=broad-except (re-raised below)
            code, error = _FAILED, e
    first = agree.outcomes(code)[0]
    if error is not None:
        raise error
    if first == _REFUSED:
        raise ExportError("process 0 could not export (its log says why)")
    if first == _FAILED:
        raise RuntimeError("the export on process 0 failed (its log says why)")


_DONE, _REFUSED, _FAILED = 0, 1, 2


def _vocab_size(meta: dict, params: dict) -> int:
    """`tiny` models take their vocabulary from the run's tokenizer."""
    if "embedder" in params:
        return params["embedder"]["input_embedding"].shape[0]
    from trainers.gemma_jax import model as model_lib  # pylint: disable=g-import-not-at-top

    return model_lib.load_tokenizer(meta["model"], (meta.get("export") or {}).get("tokenizer")).vocab_size


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        export(args.checkpoint_dir, args.out, args.step, args.dtype)
    except ExportError as e:
        print(f"configuration error: {e}", file=sys.stderr, flush=True)
        return exit_codes.CONFIG_ERROR
    return exit_codes.OK


if __name__ == "__main__":
    sys.exit(main())
