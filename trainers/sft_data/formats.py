"""What a record of each data format holds, and how it becomes training text. Standard library only.

The formats are the standard ones TRL's SFTTrainer documents (TRL 1.16,
trl/trainer/sft_config.py `completion_only_loss` / `assistant_only_loss`,
and its dataset-formats guide):

    text               {"text": "The sky is blue."}
    conversational     {"messages": [{"role": "user", "content": "..."},
                                     {"role": "assistant", "content": "..."}]}, roles system, user,
                       assistant and tool, tool calls on assistant messages, and an optional `tools`
                       column passed to the chat template (messages.py)
    sharegpt           {"conversations": [{"from": "human", "value": "..."}, {"from": "gpt", ...}]}, read
                       as the conversational messages messages.SHAREGPT_ROLES maps them to
    prompt-completion  {"prompt": "The sky is", "completion": " blue."}, or both
                       lists of messages ({"prompt": [user...], "completion": [assistant...]})

A run names its format and, where its columns are named otherwise, a
mapping from the standard names (`prompt=question,completion=answer`).
A `prompt_template` (`{column}` fields, str.format style) builds the
prompt of a prompt-completion record from its columns, and makes the
record a chat: the rendered prompt is the user's turn and the completion
the assistant's. A `system_prompt` adds a system turn to every chat.

parts.py turns a record into parts of text, each trained or not.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from trainers.exit_codes import ConfigError
from trainers.sft_data import messages as chat_messages
from trainers.sft_data.messages import ROLES, TRAINED_ROLE  # noqa: F401  (the formats' roles, for their users)

FORMATS = ("text", "conversational", "sharegpt", "prompt-completion")
CHAT_FORMATS = ("conversational", "sharegpt")  # a record is one list of messages
# The standard column names of each format (TRL's; ShareGPT's `conversations`), which `columns` may map.
STANDARD_COLUMNS = {"text": ("text",), "conversational": ("messages",), "sharegpt": ("conversations",),
                    "prompt-completion": ("prompt", "completion")}
# Columns a record may have: the tool schemas its chat template is given.
OPTIONAL_COLUMNS = {"text": (), "conversational": ("tools",), "sharegpt": ("tools",), "prompt-completion": ("tools",)}
LOSS_ON = ("completion", "all")
# Rows a trainer checks against the format before it reads the rest.
FIRST_ROWS = 100

# Renders a conversation with the model's chat template: (messages, add_generation_prompt) -> text; a record's
# tool schemas go as the keyword `tools` (parts.with_tools).
Render = Callable[..., str]


class FormatError(Exception):
    """A record, a setting or a template that does not fit the run's format; a retry can't help (exit 78)."""


class TemplateProblem(FormatError):
    """A chat template whose turns can't be masked: a different template is the way out."""


# --- the run's settings --------------------------------------------------------------------------


def trains_some_tokens(data_format: str, loss_on: str) -> bool:
    """Whether a run's records carry a loss mask: every format but text trains some tokens only, unless
    `loss_on` is all."""
    return data_format != "text" and loss_on != "all"


def parse_columns(text: str) -> dict[str, str]:
    """'prompt=question,completion=answer' -> {'prompt': 'question', 'completion': 'answer'}."""
    mapping: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        standard, eq, column = (s.strip() for s in item.partition("="))
        if not eq or not standard or not column:
            raise ValueError(f"{item!r} is not <standard name>=<column>, e.g. prompt=question")
        if standard in mapping:
            raise ValueError(f"{standard!r} is mapped twice")
        mapping[standard] = column
    return mapping


def format_columns(mapping: Mapping[str, str]) -> str:
    """The inverse of parse_columns: the flag's value for a mapping."""
    return ",".join(f"{k}={v}" for k, v in mapping.items())


# What a prompt template may hold: `{column}` fields naming the record's columns, and text ({{ and }} for braces).
TEMPLATE_FIELDS = ("{column} fields, each naming a column of the record (e.g. {question}), and text ({{ and }} for a "
                   "brace); no format spec ({x:>9}), conversion ({x!r}), index or attribute ({x[0]}, {x.y}) and no "
                   "field inside a field")


def template_fields(template: str) -> list[str]:
    """The columns a prompt template reads; ValueError for anything but plain `{column}` fields
    (string.Formatter's parse: a format spec, where nested fields live, or a conversion would reach
    str.format at start-up with what no row can fill)."""
    fields = []
    for _, name, spec, conversion in string.Formatter().parse(template):
        if name is None:
            continue
        shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
        if not name or name.isdigit():
            raise ValueError(f"has a positional field {shown}; name a column, e.g. {{question}}")
        if any(c in name for c in ".["):
            raise ValueError(f"field {shown} reads an attribute or index; name a column")
        if conversion:
            raise ValueError(f"field {shown} has a conversion (!{conversion}); write {{{name}}}")
        if spec:
            what = "a field inside it" if "{" in spec else f"a format spec (:{spec})"
            raise ValueError(f"field {shown} has {what}; write {{{name}}}")
        fields.append(name)
    return fields


@dataclass(frozen=True)
class Setting:
    """One problem with a run's data settings: which setting, why, and what is allowed."""

    setting: str  # format | columns | prompt_template | system_prompt | loss_on
    value: object
    why: str
    allowed: str


def settings_problems(data_format: str, columns: Mapping[str, str], prompt_template: str | None,
                      system_prompt: str | None, loss_on: str) -> list[Setting]:
    """Every problem of one run's data settings together; the trainers and the platform name them their way."""
    if data_format not in FORMATS:
        return [Setting("format", data_format, "is not a data format", " | ".join(FORMATS))]
    problems, standard = [], STANDARD_COLUMNS[data_format] + OPTIONAL_COLUMNS[data_format]
    problems += [Setting("columns", f"{k}={v}", f"maps {k!r}, which is not a column of format {data_format}",
                         f"{', '.join(standard)} (the format's standard columns)")
                 for k, v in columns.items() if k not in standard]
    if prompt_template is not None:
        if data_format != "prompt-completion":
            problems.append(Setting("prompt_template", prompt_template, f"builds a prompt, and format {data_format} "
                                    "has none", "a prompt template with format prompt-completion only"))
        elif "prompt" in columns:
            problems.append(Setting("prompt_template", prompt_template, "and columns.prompt both say where the "
                                    "prompt comes from", "one of them"))
        try:
            if not template_fields(prompt_template):
                problems.append(Setting("prompt_template", prompt_template, "reads no column", TEMPLATE_FIELDS))
        except ValueError as err:
            problems.append(Setting("prompt_template", prompt_template, str(err), TEMPLATE_FIELDS))
    if system_prompt is not None and data_format == "text":
        problems.append(Setting("system_prompt", system_prompt, "adds a turn to a chat, and format text is none",
                                "a system prompt with format conversational, sharegpt or prompt-completion"))
    if loss_on not in LOSS_ON:
        problems.append(Setting("loss_on", loss_on, "is not a loss setting", " | ".join(LOSS_ON)))
    return problems


@dataclass(frozen=True)
class Spec:
    """A run's data settings, checked (Spec.of)."""

    format: str = "text"
    columns: tuple[tuple[str, str], ...] = ()
    prompt_template: str | None = None
    system_prompt: str | None = None
    loss_on: str = "completion"

    @classmethod
    def of(cls, data_format: str, columns: str | Mapping[str, str] = "", prompt_template: str | None = None,
           system_prompt: str | None = None, loss_on: str = "completion") -> Spec:
        """The spec, or FormatError naming every problem."""
        mapping = parse_columns(columns) if isinstance(columns, str) else dict(columns)
        problems = settings_problems(data_format, mapping, prompt_template or None, system_prompt or None, loss_on)
        if problems:
            raise FormatError("; ".join(f"{p.setting}={p.value!r} {p.why} (allowed: {p.allowed})" for p in problems))
        return cls(data_format, tuple(mapping.items()), prompt_template or None, system_prompt or None, loss_on)

    def column(self, standard: str) -> str:
        return dict(self.columns).get(standard, standard)

    def needed_columns(self) -> list[str]:
        """The columns every record must have."""
        if self.prompt_template:
            return [*dict.fromkeys(template_fields(self.prompt_template)), self.column("completion")]
        return [self.column(name) for name in STANDARD_COLUMNS[self.format]]

    @property
    def chat_prompt(self) -> bool:
        """Whether a prompt-completion record of strings becomes a chat."""
        return bool(self.prompt_template or self.system_prompt)


DATA_FLAGS = ("data_format", "columns", "prompt_template", "system_prompt", "loss_on")


def spec_of_flags(flags) -> Spec:
    """The data settings of a trainer's parsed flags (attributes named as DATA_FLAGS), checked together;
    a ConfigError (exit code 78) naming the flags."""
    try:
        return Spec.of(*(getattr(flags, name) for name in DATA_FLAGS))
    except (FormatError, ValueError) as err:
        raise ConfigError(f"data settings ({', '.join('--' + name for name in DATA_FLAGS)}): {err}") from None


# --- one record ----------------------------------------------------------------------------------


def _fail(row: int, column: str, problem: str, expected: str) -> FormatError:
    return FormatError(f"row {row}: column {column!r} {problem}; expected {expected}")


def _column(record: Mapping, column: str, row: int, why: str):
    if not isinstance(record, Mapping):
        raise FormatError(f"row {row}: is a {type(record).__name__}, not a record of columns; expected {why}")
    if column not in record or record[column] is None:
        raise _fail(row, column, f"is missing (the row has {sorted(map(str, record))})", why)
    return record[column]


def _messages(value, row: int, column: str, expected_last: str | None = TRAINED_ROLE,
              sharegpt: bool = False) -> list[dict]:
    """TRL messages (messages.py): a list of them, a JSON string of one, or ShareGPT turns mapped onto them."""
    try:
        messages = chat_messages.sharegpt_messages(value) if sharegpt else chat_messages.messages(value)
    except chat_messages.MessageError as err:
        raise _fail(row, column, err.problem, err.expected) from None
    if expected_last and messages[-1]["role"] != expected_last:
        raise _fail(row, column, f"ends with a {messages[-1]['role']} message",
                    f"the conversation to end with an {expected_last} message (the one trained last)")
    return messages


def _tools(spec: Spec, record: Mapping, row: int) -> tuple[dict, ...]:
    column = spec.column("tools")
    try:
        return tuple(chat_messages.tools(record.get(column)) or ())
    except chat_messages.MessageError as err:
        raise _fail(row, column, err.problem, err.expected) from None


def _text(record: Mapping, column: str, row: int) -> str:
    value = _column(record, column, row, "a string")
    if not isinstance(value, str):
        raise _fail(row, column, f"is {type(value).__name__} {str(value)[:40]!r}", "a string")
    return value


def _prompt(spec: Spec, record: Mapping, row: int):
    """The prompt of a prompt-completion record: a string, or messages."""
    if spec.prompt_template:
        for name in template_fields(spec.prompt_template):
            _column(record, name, row, f"a value for {{{name}}} of the prompt template")
        return spec.prompt_template.format_map({k: "" if v is None else v for k, v in record.items()})
    column = spec.column("prompt")
    value = _column(record, column, row, "a string, or a list of messages")
    return value if isinstance(value, str) else _messages(value, row, column, expected_last=None)


@dataclass(frozen=True)
class Record:
    """A record in the trainers' terms: a chat (messages, trained from an index) or plain text parts."""

    messages: tuple[dict, ...] = ()
    trained_from: int = 0  # assistant turns at or after this index carry the loss
    plain: tuple[tuple[str, bool], ...] = ()  # (text, trained), when not a chat
    tools: tuple[dict, ...] = ()  # function schemas the chat template is given

    @property
    def uses_tools(self) -> bool:
        return bool(self.tools) or chat_messages.uses_tools(self.messages)

    @property
    def chat(self) -> bool:
        return bool(self.messages)


def read_record(spec: Spec, record: Mapping, row: int) -> Record:
    """The record as a chat or as plain text; FormatError naming the row, the column and what was expected.
    Refused too, where TRL's SFTTrainer would train something other than the answer (docs/own-data.md,
    "Parity with TRL"): an empty trained answer, a completion holding a turn of another role, a plain
    prompt ending in a space or tab."""
    read = _read_record(spec, record, row)
    _trl_divergence(spec, read, row)
    return read


def read_prompt_record(spec: Spec, record: Mapping, row: int) -> Record:
    """The record for inference (a generation check, a prompt whose answer is to come): read as
    `read_record` reads it, without the rules about what training would learn from its answer."""
    return _read_record(spec, record, row)


def _trl_divergence(spec: Spec, read: Record, row: int) -> None:
    if read.chat:
        trained = [(i, m) for i, m in enumerate(read.messages) if i >= read.trained_from]
        if spec.format == "prompt-completion" and any(m["role"] != TRAINED_ROLE for _, m in trained):
            role = next(m["role"] for _, m in trained if m["role"] != TRAINED_ROLE)
            raise _fail(row, spec.column("completion"), f"holds a {role} turn, which TRL trains as the model's "
                        "words", "a completion of assistant turns only (earlier turns belong in the prompt)")
        if any(m["role"] == TRAINED_ROLE and not chat_messages.has_answer(m) for _, m in trained):
            column = spec.column(STANDARD_COLUMNS[spec.format][-1])
            raise _fail(row, column, "has an empty assistant answer, which would train the model to end its "
                        "turn at once", "a non-empty answer (drop the row)")
    elif len(read.plain) == 2 and read.plain[0][0][-1:] in (" ", "\t"):
        raise _fail(row, spec.column("prompt"), "ends in a space or tab, which the tokenizer joins to the "
                    "completion's first word (TRL tokenizes them together, so no token boundary falls there)",
                    "the space at the start of the completion instead, e.g. prompt 'The sky is', "
                    "completion ' blue.'")


def _read_record(spec: Spec, record: Mapping, row: int) -> Record:
    if spec.format == "text":
        return Record(plain=((_text(record, spec.column("text"), row), True),))
    system = [{"role": "system", "content": spec.system_prompt}] if spec.system_prompt else []
    if spec.format in CHAT_FORMATS:
        column = spec.column(STANDARD_COLUMNS[spec.format][0])
        messages = _messages(_column(record, column, row, "a list of messages"), row, column,
                             sharegpt=spec.format == "sharegpt")
        if system and messages[0]["role"] == "system":
            system = []  # the record's own system turn stands
        return Record(messages=tuple(system + messages), trained_from=0, tools=_tools(spec, record, row))
    prompt, completion_column = _prompt(spec, record, row), spec.column("completion")
    completion = _column(record, completion_column, row, "a string, or a list of messages")
    if isinstance(prompt, str) and isinstance(completion, str) and not spec.chat_prompt:
        return Record(plain=((prompt, spec.loss_on == "all"), (completion, True)))
    if isinstance(prompt, str):
        prompt = [{"role": "user", "content": prompt}]
    if isinstance(completion, str):
        completion = [{"role": TRAINED_ROLE, "content": completion}]
    else:
        completion = _messages(completion, row, completion_column)
    if system and prompt[0]["role"] == "system":
        system = []
    head = system + list(prompt)
    return Record(messages=tuple(head + completion), trained_from=len(head), tools=_tools(spec, record, row))


def check_rows(spec: Spec, rows, first: int = 1) -> None:
    """FormatError for the first row of `rows` (numbered from `first`) that does not fit the format."""
    for i, record in enumerate(rows):
        read_record(spec, record, first + i)
