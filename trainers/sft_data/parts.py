"""A record as parts of text, each trained or not: what both trainers tokenize. Standard library only.

By default only the assistant's turns (conversational), or the completion (prompt-completion),
carry loss, each with the end-of-turn marker its chat template closes the turn with; `loss_on=all`
trains every token. A chat's last assistant turn follows the generation prompt exactly as
inference renders it (`add_generation_prompt=True`: Gemma 4 31B's empty thought block included);
earlier turns are trained where the template renders a conversation's history. A template whose
turns can't be found that way is a TemplateProblem (formats.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from trainers.sft_data.formats import (TRAINED_ROLE, FormatError, Render, Spec, TemplateProblem, read_prompt_record,
                                       read_record)

# An answer no template prints by itself, whose rendering shows what a template puts around an answer.
_PROBE = "ANSWERPROBE7193"


@dataclass(frozen=True)
class Turn:
    """Where one assistant turn sits in its rendering: the text before it, its content, its end-of-turn marker."""

    before: str
    content: str
    marker: str

    @property
    def end(self) -> int:
        return len(self.before) + len(self.content) + len(self.marker)


def _render(render: Render, messages: list[dict], generation_prompt: bool, row: int) -> str:
    try:
        return render(messages, generation_prompt)
    except Exception as err:  # jinja's own errors, or the template's raise_exception: this row's messages
        raise FormatError(f"row {row}: the chat template refuses its messages: {err}") from None


def assistant_turn(render: Render, history: list[dict], content: str, row: int = 0) -> Turn:
    """How the template renders `content` as the assistant's turn after `history` (Gemma templates trim
    contents; the whitespace they print after the end-of-turn marker is no part of the turn)."""
    probe = _render(render, [*history, {"role": TRAINED_ROLE, "content": _PROBE}], False, row)
    at = probe.rfind(_PROBE)
    if at < 0:
        raise TemplateProblem("the chat template does not print the assistant's answer")
    before, after = probe[:at], probe[at + len(_PROBE):]
    marker = after.rstrip()
    if not marker:
        raise TemplateProblem("the chat template closes an assistant turn with no end-of-turn marker")
    full = _render(render, [*history, {"role": TRAINED_ROLE, "content": content}], False, row)
    for text in (content, content.strip()):
        if text and full == before + text + after:
            return Turn(before, text, marker)
    raise TemplateProblem(f"row {row}: the chat template renders the assistant's answer {content[:50]!r} other than "
                          "as its text (or the answer is empty)")


def chat_parts(render: Render, messages: Sequence[dict], trained_from: int, loss_on: str = "completion",
               row: int = 0) -> tuple[tuple[str, bool], ...]:
    """The parts of a chat ending with an assistant turn: the generation prompt of the last turn exactly as
    inference renders it, then its answer and marker; the earlier assistant turns (from `trained_from`) are
    trained where the template's rendering of the history puts them."""
    messages = list(messages)
    last = _render(render, messages[:-1], True, row)
    final = assistant_turn(render, messages[:-1], messages[-1]["content"], row)
    if not last.startswith(final.before):
        raise TemplateProblem("the chat template renders the prompt turns differently with and without an answer "
                              f"after them ({_difference(last, final.before)})")
    spans = []
    for i, message in enumerate(messages[:-1]):
        if message["role"] != TRAINED_ROLE or i < trained_from:
            continue
        turn = assistant_turn(render, messages[:i], message["content"], row)
        history = turn.before + turn.content + turn.marker
        if not last.startswith(history):
            raise TemplateProblem(f"row {row}: the chat template renders turn {i} differently once later turns "
                                  f"follow ({_difference(last, history)})")
        spans.append((len(turn.before), turn.end))
    if loss_on == "all":
        return ((last + final.content + final.marker, True),)
    parts, at = [], 0
    for start, end in spans:
        parts += [(last[at:start], False), (last[start:end], True)]
        at = end
    parts += [(last[at:], False), (final.content + final.marker, True)]
    return tuple((text, trained) for text, trained in parts if text)


def _difference(a: str, b: str) -> str:
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"first difference at character {i}: {a[i:i + 30]!r} vs {b[i:i + 30]!r}"


@dataclass(frozen=True)
class Example:
    """A record as text parts, each trained or not. A chat's text is a template rendering (which holds its
    own begin-of-sequence token); plain text is bracketed by the tokenizer's BOS and EOS, the EOS trained
    with the last part."""

    parts: tuple[tuple[str, bool], ...]
    chat: bool

    @property
    def text(self) -> str:
        return "".join(text for text, _ in self.parts)

    def tokens(self, encode: Callable[[str], list[int]], bos: int | None, eos: int | None) -> tuple[list[int], list[bool]]:
        """The record's token ids and, for each, whether the loss is taken on it: each part encoded
        (`encode`: a tokenizer's, adding no special token), plain text between `bos` and `eos` where the
        tokenizer has them, the EOS trained with the last part."""
        ids, trained = ([bos], [False]) if not self.chat and bos is not None else ([], [])
        for text, loss in self.parts:
            part = encode(text)
            ids += part
            trained += [loss] * len(part)
        if not self.chat and eos is not None:
            ids.append(eos)
            trained.append(self.parts[-1][1])
        return ids, trained


def example(spec: Spec, record: Mapping, render: Render | None, row: int = 0) -> Example:
    """The record's training text, as parts."""
    read = read_record(spec, record, row)
    if not read.chat:
        parts = tuple((text, trained or spec.loss_on == "all") for text, trained in read.plain)
        return Example(parts, chat=False)
    if render is None:
        raise FormatError(f"row {row}: a chat needs the model's chat template, and this run has none")
    return Example(chat_parts(render, read.messages, read.trained_from, spec.loss_on, row), chat=True)


def prompt_and_answer(spec: Spec, record: Mapping, row: int = 0) -> tuple[list[dict] | str, str]:
    """What inference is given (the messages before the last assistant turn, or the plain prompt) and the
    reference answer, for a generation check on held-out records (or a prompt whose answer is to come:
    an empty answer is no training here)."""
    read = read_prompt_record(spec, record, row)
    if read.chat:
        return list(read.messages[:-1]), read.messages[-1]["content"]
    if len(read.plain) != 2:
        raise FormatError(f"format {spec.format} has no prompt to generate from")
    return read.plain[0][0], read.plain[1][0]
