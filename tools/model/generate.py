"""`make generate`: an exported model directory on this machine's CPU or GPU, its chat template
applied to the prompt, the answer streamed token by token (transformers' TextIteratorStreamer,
generation in a thread beside it). Runs in .venv-gpu (torch, transformers)."""

from __future__ import annotations

import sys
import threading

from trainers import export_dir


class NotLoadable(Exception):
    """The directory is no complete export (the message says why)."""


def device_of(choice: str) -> str:
    import torch  # pylint: disable=import-outside-toplevel

    if choice == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return choice


def load(directory: str, device: str = "auto"):
    """(model, tokenizer, marker) of a complete export; NotLoadable otherwise."""
    try:
        marker = export_dir.read(directory)
    except export_dir.IncompleteExport as err:
        raise NotLoadable(str(err)) from None
    from transformers import AutoModelForCausalLM, AutoTokenizer  # pylint: disable=import-outside-toplevel

    tokenizer = AutoTokenizer.from_pretrained(directory)
    if not marker.get("merge", True):
        from peft import AutoPeftModelForCausalLM  # pylint: disable=import-outside-toplevel

        model = AutoPeftModelForCausalLM.from_pretrained(directory)  # the adapter names its base model
    else:
        model = AutoModelForCausalLM.from_pretrained(directory, dtype="auto")
    return model.to(device_of(device)).eval(), tokenizer, marker


def prompt_ids(tokenizer, prompt: str, system: str | None = None):
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True, return_tensors="pt")


def stream(model, tokenizer, prompt: str, max_new_tokens: int, system: str | None = None, out=sys.stdout) -> str:
    """Greedy generation of the answer, each piece written to `out` as it comes; the whole answer."""
    from transformers import TextIteratorStreamer  # pylint: disable=import-outside-toplevel

    inputs = {k: v.to(model.device) for k, v in prompt_ids(tokenizer, prompt, system).items()}
    streamer = TextIteratorStreamer(tokenizer, skip_prompt=True, skip_special_tokens=True)
    kwargs = dict(**inputs, streamer=streamer, max_new_tokens=max_new_tokens, do_sample=False,
                  pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id)
    worker = threading.Thread(target=model.generate, kwargs=kwargs, daemon=True)
    worker.start()
    pieces = []
    for piece in streamer:
        pieces.append(piece)
        out.write(piece)
        out.flush()
    worker.join()
    out.write("\n")
    return "".join(pieces)
