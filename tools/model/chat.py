"""`make chat STACK=s`: talk to the stack's model server (`serve:`) with the OpenAI client.

The server is vLLM's OpenAI-compatible server (manifests/serving.py), behind a ClusterIP Service. `make chat`
port-forwards that Service to 127.0.0.1 (`kubectl port-forward svc/<name> <local>:8000`,
https://kubernetes.io/docs/reference/kubectl/generated/kubectl_port-forward/) and sends what any OpenAI client
sends: POST /v1/chat/completions, streamed, for the model the server lists at GET /v1/models (vLLM lists its
`--served-model-name`, the run; https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html). The
conversation is kept, so each answer sees the turns before it.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TextIO

SERVER_PORT = 8000  # manifests/serving.py PORT
FORWARD_WAIT_SECONDS = 30


class ChatError(Exception):
    """A server that can't be reached or has no model to talk to; `code` is the exit status."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def client(base_url: str, timeout: float = 600.0):
    """An OpenAI client of the server at `base_url` (…/v1). The server holds no API key (its Service is reached
    from inside the cluster or through a port-forward), and the client requires one: any value."""
    from openai import OpenAI  # pylint: disable=import-outside-toplevel

    return OpenAI(base_url=base_url, api_key="none", timeout=timeout, max_retries=0)


def served_model(api, wanted: str | None) -> str:
    """The model to talk to: `wanted` (the run) where the server lists it, else the one it lists."""
    ids = [model.id for model in api.models.list().data]
    if wanted in ids:
        return wanted
    if len(ids) == 1:
        return ids[0]
    raise ChatError(f"the server lists models {ids or '(none)'}, and none is {wanted!r}", 69)


def reply(api, model: str, messages: list[dict], max_tokens: int, out: TextIO) -> str:
    """The model's answer to `messages`, written to `out` as it streams; the whole answer returned."""
    stream = api.chat.completions.create(model=model, messages=messages, max_tokens=max_tokens, stream=True)
    parts = []
    for chunk in stream:
        text = chunk.choices[0].delta.content if chunk.choices else None
        if text:
            parts.append(text)
            out.write(text)
            out.flush()
    out.write("\n")
    return "".join(parts)


def conversation(api, model: str, prompts: Iterable[str], system: str | None, max_tokens: int,
                 out: TextIO) -> list[dict]:
    """Each prompt in turn, answered with the turns before it; the messages as sent, and the answers."""
    messages = [{"role": "system", "content": system}] if system else []
    for prompt in prompts:
        messages.append({"role": "user", "content": prompt})
        messages.append({"role": "assistant", "content": reply(api, model, messages, max_tokens, out)})
    return messages


def typed_prompts(source: TextIO, out: TextIO) -> Iterator[str]:
    """Lines typed at a `> ` prompt, until an empty line or the end of input."""
    while True:
        out.write("> ")
        out.flush()
        line = source.readline()
        if not line.strip():
            return
        yield line.strip()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def port_forward(namespace: str, service: str, context: str | None = None) -> Iterator[str]:
    """The Service's port on 127.0.0.1 while the block runs; its base URL (…/v1) yielded."""
    local = _free_port()
    command = ["kubectl", "port-forward", "-n", namespace, f"svc/{service}", f"{local}:{SERVER_PORT}",
               "--address", "127.0.0.1", *(["--context", context] if context else [])]
    try:
        forward = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    except FileNotFoundError:
        raise ChatError("kubectl is not installed; `make doctor` says how to get it", 69) from None
    try:
        deadline = time.monotonic() + FORWARD_WAIT_SECONDS
        while not _listening(local):
            if forward.poll() is not None or time.monotonic() > deadline:
                why = (forward.stderr.read() if forward.poll() is not None else "no answer").strip()
                raise ChatError(f"`{' '.join(command)}` failed: {why} (is the server up? `make status` shows it)", 69)
            time.sleep(0.2)
        yield f"http://127.0.0.1:{local}/v1"
    finally:
        forward.terminate()
        forward.wait(timeout=10)


def chat(base_url: str, run: str | None, prompt: str | None, system: str | None, max_tokens: int,
         source: TextIO = sys.stdin, out: TextIO = sys.stdout) -> int:
    """One prompt's answer (`prompt`), or a conversation typed at the terminal."""
    from openai import APIError  # pylint: disable=import-outside-toplevel

    api = client(base_url)
    try:
        model = served_model(api, run)
        print(f"[{base_url}: model {model}]", file=sys.stderr, flush=True)
        prompts = [prompt] if prompt else typed_prompts(source, out)
        conversation(api, model, prompts, system, max_tokens, out)
    except APIError as err:  # refused, unreachable, or the server's own error: said in one line
        raise ChatError(f"{base_url}: {type(err).__name__}: {err}", 69) from None
    return 0
