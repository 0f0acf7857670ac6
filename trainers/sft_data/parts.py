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

from trainers.sft_data.formats import (STANDARD_COLUMNS, TRAINED_ROLE, FormatError, Record, Render, Spec,
                                       TemplateProblem, read_prompt_record, read_record)

# An answer no template prints by itself, whose rendering shows what a template puts around an answer.
_PROBE = "ANSWERPROBE7193"
# A tool no template names by itself: a template that prints neither it as a call nor its schema drops them.
_TOOL_PROBE = "toolprobe7193"


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
    return _assemble(last, spans, final.content + final.marker, loss_on)


def _assemble(last: str, spans: list[tuple[int, int]], answer: str, loss_on: str) -> tuple[tuple[str, bool], ...]:
    """The generation prompt of the last turn with the earlier trained spans marked, then the answer."""
    if loss_on == "all":
        return ((last + answer, True),)
    parts, at = [], 0
    for start, end in spans:
        parts += [(last[at:start], False), (last[start:end], True)]
        at = end
    parts += [(last[at:], False), (answer, True)]
    return tuple((text, trained) for text, trained in parts if text)


def _common(a: str, b: str) -> int:
    return next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def _said(render: Render, messages: list[dict], k: int, row: int) -> tuple[str, int, int]:
    """The rendering of messages[:k + 1] and where message k's own words are in it: after what the ones
    before render to and the generation prompt the template opens its turn with, up to the whitespace
    after its end."""
    before = _render(render, messages[:k], False, row)
    full = _render(render, messages[:k + 1], False, row)
    if not full.startswith(before):
        raise TemplateProblem(f"row {row}: the chat template renders the conversation before message {k} "
                              f"differently once message {k} follows ({_difference(full, before)})")
    opening = _render(render, messages[:k], True, row)[len(before):]
    start = len(before) + _common(opening, full[len(before):])
    return full, start, max(start, len(full.rstrip()))


def tool_chat_parts(render: Render, messages: Sequence[dict], trained_from: int, loss_on: str = "completion",
                    row: int = 0) -> tuple[tuple[str, bool], ...]:
    """The parts of a chat with tool calls. A template may render a call, its result and the answer after it
    as one turn (Gemma 4 does), so each message is what it adds to the rendering of the ones before it
    (the template must render a conversation's start the same once more follows: "prefix-preserving", as
    TRL's tool loop needs, trl/chat_templates/README.md); an assistant message's words are trained, without
    the generation prompt before them; tool results, as every other role's turn, are not. The last
    assistant turn follows the generation prompt exactly as inference renders it."""
    messages = list(messages)
    if messages[0]["role"] == TRAINED_ROLE:
        raise FormatError(f"row {row}: a chat with tool calls opens with an assistant message; expected a user "
                          "(or system) message first")
    spans = []
    for k in range(1, len(messages) - 1):
        if messages[k]["role"] == TRAINED_ROLE and k >= trained_from:
            _, start, end = _said(render, messages, k, row)
            spans.append((start, end))
    full, start, end = _said(render, messages, len(messages) - 1, row)
    history, last = full[:start], _render(render, messages[:-1], True, row)
    if not last.startswith(history) or any(end > len(history) for _, end in spans):
        raise TemplateProblem(f"row {row}: the chat template renders the last turn's prompt differently with and "
                              f"without an answer after it ({_difference(last, history)})")
    return _assemble(last, spans, full[start:end], loss_on)


def _difference(a: str, b: str) -> str:
    i = _common(a, b)
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


def with_tools(render: Render, tools: Sequence[dict]) -> Render:
    """The template given the record's tool schemas, as SFTTrainer gives them (`tools=` of
    apply_chat_template); the renderers here take them as a keyword (chat.ChatTemplate.render, the GPU
    trainer's tokenizer renderer)."""
    return lambda messages, generation_prompt: render(messages, generation_prompt, tools=list(tools))


TOOLS_EXPECTED = ("a model whose chat template renders tool calls and tools, e.g. Gemma 4's own (docs/own-data.md, "
                  "Tool calls), or records without them")


def tools_problem(render: Render, read: Record, row: int) -> str | None:
    """Why the template can't train the record's tools, or None: a template that prints no tool call
    (Gemma 3's reads only `content`, so a call would be trained as an empty turn) or no tool schema
    (the model would learn calls to tools it was never shown)."""
    call = {"role": TRAINED_ROLE, "content": "", "tool_calls": [
        {"type": "function", "function": {"name": _TOOL_PROBE, "arguments": {"x": 1}}}]}
    user = {"role": "user", "content": "?"}
    if any(m.get("tool_calls") for m in read.messages) \
            and _TOOL_PROBE not in _render(render, [user, call], False, row):
        return "holds tool calls, and the chat template prints no tool call (it would train an empty turn)"
    schema = {"type": "function", "function": {"name": _TOOL_PROBE, "description": "probe",
                                                "parameters": {"type": "object", "properties": {}}}}
    if read.tools and _TOOL_PROBE not in _render(with_tools(render, [schema]), [user], True, row):
        return "has tools, and the chat template prints no tool schema"
    return None


def tools_refusal(spec: Spec, render: Render, read: Record, row: int, template: str = "the chat template") -> str | None:
    """Why a record of tool calls or tools is refused with this template (column, reason, what is allowed)."""
    problem = tools_problem(render, read, row) if read.uses_tools else None
    if problem is None:
        return None
    column = spec.column(STANDARD_COLUMNS[spec.format][-1])
    return f"column {column!r} {problem.replace('the chat template', template)}; expected {TOOLS_EXPECTED}"


def example(spec: Spec, record: Mapping, render: Render | None, row: int = 0) -> Example:
    """The record's training text, as parts."""
    return example_of_read(spec, read_record(spec, record, row), render, row)


def example_of_read(spec: Spec, read: Record, render: Render | None, row: int = 0) -> Example:
    """A record already read by read_record, as its training text's parts."""
    if not read.chat:
        parts = tuple((text, trained or spec.loss_on == "all") for text, trained in read.plain)
        return Example(parts, chat=False)
    if render is None:
        raise FormatError(f"row {row}: a chat needs the model's chat template, and this run has none")
    if read.uses_tools:
        refusal = tools_refusal(spec, render, read, row)
        if refusal:
            raise FormatError(f"row {row}: {refusal}")
        render = with_tools(render, read.tools) if read.tools else render
        return Example(tool_chat_parts(render, read.messages, read.trained_from, spec.loss_on, row), chat=True)
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
