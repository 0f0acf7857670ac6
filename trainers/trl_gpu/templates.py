"""Chat templates: which one a run uses, and what the model says after the prompt.

A pretrained checkpoint (Gemma 3 270M, for one) ships no chat template; an
instruction-tuned one does. `--chat_template` names a template file or one of
the templates TRL ships (`known_templates()`), and replaces the tokenizer's.

Templates differ in what follows the generation prompt. Gemma 3 and the
Gemma 4 E2B-style templates open the model turn (`<start_of_turn>model\\n`,
`<|turn>model\\n`) and stop. The Gemma 4 31B-style template, with thinking
off, also prints an empty thought block (`<|channel>thought\\n<channel|>`)
there, while a past assistant turn renders without it. `split_turn` reads
both renderings and returns what inference sees (the generation prompt) and
what the model must then produce (the answer and the end-of-turn marker).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from .errors import ConfigError

_FLAG = "--chat_template"


def _trl_template_dir() -> Path | None:
    spec = importlib.util.find_spec("trl")  # located without importing TRL
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "chat_templates"


def known_templates() -> dict[str, Path]:
    """Name -> file of every chat template TRL ships (`gemma3`, `gemma4_v5`, ...).

    The `*_training` variants (with `{% generation %}` markers) are left out:
    this trainer builds its own mask and trains on the template inference uses."""
    directory = _trl_template_dir()
    if directory is None or not directory.is_dir():
        return {}
    return {p.stem: p for p in sorted(directory.glob("*.jinja")) if not p.stem.endswith("_training")}


def resolve(value: str) -> str:
    """The template text that `--chat_template` names: a file, or a known name."""
    if os.path.isfile(value):
        try:
            return Path(value).read_text()
        except (OSError, UnicodeDecodeError) as err:
            raise ConfigError(f"{_FLAG}={value!r}: cannot read the file: {err}") from err
    known = known_templates()
    if value in known:
        return known[value].read_text()
    raise ConfigError(f"{_FLAG}={value!r} is neither a file nor a known template; known: {sorted(known)}")


def check_name(value: str | None) -> None:
    """Parse-time check, before anything is loaded."""
    if value:
        resolve(value)


def render(tokenizer, messages: list[dict], generation_prompt: bool) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)


def split_turn(tokenizer, messages: list[dict], answer: str) -> tuple[str, str]:
    """(prompt, completion): the generation prompt exactly as inference renders
    it, and the answer followed by the end-of-turn marker the template closes
    an assistant turn with (whitespace after the marker dropped: the model
    stops at the marker and never produces it)."""
    prompt = render(tokenizer, messages, generation_prompt=True)
    full = render(tokenizer, messages + [{"role": "assistant", "content": answer}], generation_prompt=False)
    content = answer.strip()  # Gemma templates trim message contents
    start = full.rfind(content) if content else -1
    if start < 0:
        raise ConfigError(f"the chat template does not render the assistant's answer as given ({answer[:60]!r}); check {_FLAG}")
    before, end_marker = full[:start], full[start + len(content) :].rstrip()
    if not prompt.startswith(before):
        # The prompt turns render differently once an answer follows: the
        # template is not one this trainer can mask (a retry cannot help).
        raise ConfigError(
            "the chat template renders the prompt turns differently with and without an answer after them "
            f"({_diff_hint(prompt, before)}); check {_FLAG}"
        )
    if not end_marker:
        raise ConfigError(f"the chat template closes an assistant turn with no end-of-turn marker; check {_FLAG}")
    return prompt, content + end_marker


def _diff_hint(a: str, b: str) -> str:
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"first difference at character {i}: {a[i : i + 30]!r} vs {b[i : i + 30]!r}"


def end_of_turn_marker(tokenizer) -> str:
    """The text the template closes an assistant turn with (`<turn|>`, `<end_of_turn>`)."""
    answer = "SELECT answer_probe FROM t"  # text no template prints by itself
    _, completion = split_turn(tokenizer, [{"role": "user", "content": "question"}], answer)
    return completion[len(answer) :]
