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

from trainers.exit_codes import ConfigError
from trainers.sft_data import formats, parts

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


def problem(err: formats.FormatError) -> ConfigError:
    """A data or template problem as this trainer's configuration error, naming the flag that changes the template."""
    if isinstance(err, formats.TemplateProblem):
        return ConfigError(f"{err}; check {_FLAG} (or the model's own chat template)")
    return ConfigError(str(err))


def split_turn(tokenizer, messages: list[dict], answer: str) -> tuple[str, str]:
    """(prompt, completion): the generation prompt exactly as inference renders
    it, and the answer followed by the end-of-turn marker the template closes
    an assistant turn with (whitespace after the marker dropped: the model
    stops at the marker and never produces it). trainers/sft_data/parts.py
    (trainers/sft_data/parts.py) `chat_parts` does the work for every turn of a chat."""
    chat = [*messages, {"role": "assistant", "content": answer}]
    try:
        pieces = parts.chat_parts(lambda m, g: render(tokenizer, m, g), chat, trained_from=len(messages))
    except formats.FormatError as err:
        raise problem(err) from None
    return "".join(text for text, _ in pieces[:-1]), pieces[-1][0]


def end_of_turn_marker(tokenizer) -> str:
    """The text the template closes an assistant turn with (`<turn|>`, `<end_of_turn>`)."""
    answer = "SELECT answer_probe FROM t"  # text no template prints by itself
    _, completion = split_turn(tokenizer, [{"role": "user", "content": "question"}], answer)
    return completion[len(answer) :]
