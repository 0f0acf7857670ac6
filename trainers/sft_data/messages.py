"""The messages of a chat, as TRL's conversational format defines them, and ShareGPT's mapped onto them.
Standard library only.

TRL 1.16's conversational format (https://huggingface.co/docs/trl/dataset_formats, "Conversational"
and "Tool calling"): each message has a `role` (system, user, assistant, tool) and a string `content`;
an assistant message may carry `tool_calls`, a list of `{"type": "function", "function": {"name": ...,
"arguments": {...}}}`, instead of (or beside) its content; a `tool` message holds what a call returned
(with the tool's `name` or a `tool_call_id` where the record has them). A record's `tools` column (a
list of JSON schemas, or a JSON string of one) is passed to the chat template: SFTTrainer's
`tokenize_fn` does `apply_chat_template(..., tools=json.loads(tools) if a string)`
(trl/trainer/sft_trainer.py).

ShareGPT records (`{"conversations": [{"from": "human", "value": "..."}, {"from": "gpt", ...}]}`) map
onto those messages by their `from` (SHAREGPT_ROLES), with the tags LLaMA-Factory's sharegpt format
uses (hiyouga/LLaMA-Factory data/README.md: human, gpt, system, function_call, observation) and the
`tool` Axolotl's sharegpt mapping adds; a `function_call` turn's value is the JSON of one call
(`{"name": ..., "arguments": {...}}`) or a list of them, and becomes an assistant message's tool calls.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

ROLES = ("system", "user", "assistant", "tool")
TRAINED_ROLE = "assistant"
TOOL_ROLE = "tool"
# ShareGPT `from` -> TRL role; `function_call` also turns its value into tool calls.
SHAREGPT_ROLES = {"system": "system", "human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
                  "function_call": "assistant", "observation": "tool", "tool": "tool"}
FUNCTION_CALL = "function_call"
_TOOL_KEYS = ("name", "tool_call_id")  # what a tool message may say about the call it answers

EXPECTED = (f"a list of {{role, content}} messages, roles {'/'.join(ROLES)}, contents strings (an assistant message "
            "may hold tool_calls instead)")
SHAREGPT_EXPECTED = (f"a list of {{from, value}} turns, from one of {', '.join(SHAREGPT_ROLES)}, values strings "
                     "(a function_call's value: the JSON of a call {name, arguments} or a list of them)")


class MessageError(ValueError):
    """One message that is not what the format holds: what is wrong, and what is allowed."""

    def __init__(self, problem: str, expected: str = EXPECTED):
        super().__init__(problem)
        self.problem, self.expected = problem, expected


def _json_list(value, what: str, expected: str):
    """A list, or a JSON string of one (CSV holds lists as JSON text)."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise MessageError(f"holds text that is not a JSON list of {what}", expected) from None
    if not isinstance(value, Sequence) or isinstance(value, str) or not value:
        raise MessageError(f"is {type(value).__name__} {str(value)[:40]!r}", expected)
    return value


def _arguments(value, where: str):
    if isinstance(value, str):  # OpenAI's wire format holds arguments as JSON text
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise MessageError(f"{where}: arguments {value[:40]!r} are not JSON") from None
    if not isinstance(value, Mapping):
        raise MessageError(f"{where}: arguments are {type(value).__name__}, not an object of named arguments")
    return dict(value)


def tool_call(call, where: str) -> dict:
    """One call as TRL's format has it: {"type": "function", "function": {"name", "arguments"}}."""
    function = call.get("function", call) if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str) or not function["name"]:
        raise MessageError(f"{where} is {str(call)[:60]!r}, not a call",
                           'a tool call {"type": "function", "function": {"name": ..., "arguments": {...}}}')
    return {"type": "function", "function": {"name": function["name"],
                                             "arguments": _arguments(function.get("arguments", {}), where)}}


def message(value, index: int) -> dict:
    """One TRL message, checked; only the keys a chat template reads are kept."""
    where = f"message {index}"
    if not isinstance(value, Mapping):
        raise MessageError(f"{where} is {str(value)[:60]!r}")
    role = value.get("role")
    if role not in ROLES:
        raise MessageError(f"{where} has role {role!r}", f"one of the roles {', '.join(ROLES)}")
    content, calls = value.get("content"), value.get("tool_calls")
    if role == TRAINED_ROLE and calls:
        out = {"role": role, "content": content if isinstance(content, str) else "",
               "tool_calls": [tool_call(c, f"{where} tool call {i}") for i, c in enumerate(_json_list(
                   calls, "tool calls", "a list of tool calls"))]}
        if content is not None and not isinstance(content, str):
            raise MessageError(f"{where} has content {str(content)[:40]!r}")
        return out
    if calls:
        raise MessageError(f"{where} is a {role} message with tool_calls", "tool calls on assistant messages only")
    if not isinstance(content, str):
        raise MessageError(f"{where} is {str(value)[:60]!r}")
    out = {"role": role, "content": content}
    if role == TOOL_ROLE:
        out.update({k: value[k] for k in _TOOL_KEYS if isinstance(value.get(k), str)})
    return out


def messages(value) -> list[dict]:
    """A list of TRL messages (a JSON string of one, as CSV holds it, too)."""
    return [message(m, i) for i, m in enumerate(_json_list(value, "messages", EXPECTED))]


def _sharegpt_calls(text: str, where: str) -> list[dict]:
    try:
        calls = json.loads(text)
    except json.JSONDecodeError:
        raise MessageError(f"{where} is a function_call whose value is not JSON ({text[:40]!r})",
                           SHAREGPT_EXPECTED) from None
    calls = calls if isinstance(calls, list) and calls else [calls]
    return [tool_call(c, f"{where} call {i}") for i, c in enumerate(calls)]


def sharegpt_messages(value) -> list[dict]:
    """ShareGPT turns as TRL messages (SHAREGPT_ROLES)."""
    out = []
    for i, turn in enumerate(_json_list(value, "turns", SHAREGPT_EXPECTED)):
        where = f"turn {i}"
        if not isinstance(turn, Mapping) or not isinstance(turn.get("value"), str):
            raise MessageError(f"{where} is {str(turn)[:60]!r}", SHAREGPT_EXPECTED)
        source = turn.get("from")
        if source not in SHAREGPT_ROLES:
            raise MessageError(f"{where} is from {source!r}, which is no ShareGPT role",
                               f"one of the roles {', '.join(SHAREGPT_ROLES)} (docs/own-data.md, ShareGPT)")
        if source == FUNCTION_CALL:
            out.append({"role": TRAINED_ROLE, "content": "", "tool_calls": _sharegpt_calls(turn["value"], where)})
        else:
            out.append({"role": SHAREGPT_ROLES[source], "content": turn["value"]})
    return out


def tools(value) -> list[dict] | None:
    """A record's `tools` column: JSON schemas of functions (a JSON string of a list, too); None when empty."""
    if value is None or value == "" or value == []:
        return None
    listed = _json_list(value, "tool schemas", "a list of function schemas, or a JSON string of one")
    for i, schema in enumerate(listed):
        if not isinstance(schema, Mapping):
            raise MessageError(f"tool {i} is {str(schema)[:40]!r}", "a list of function schemas (JSON objects)")
    return [dict(s) for s in listed]


def uses_tools(chat: Sequence[dict]) -> bool:
    """Whether a chat holds tool calls or tool results."""
    return any(m["role"] == TOOL_ROLE or m.get("tool_calls") for m in chat)


def has_answer(m: dict) -> bool:
    """An assistant message says something: text, or a tool call."""
    return bool(m["content"]) or bool(m.get("tool_calls"))


def shown(m: dict) -> str:
    """A message's text for a reader: its content, then each tool call as name(arguments)."""
    calls = [f"{c['function']['name']}({json.dumps(c['function']['arguments'], ensure_ascii=False)})"
             for c in m.get("tool_calls", ())]
    return " ".join(filter(None, [m["content"], *calls]))
