"""ShareGPT records, tool calls and mixes in the shared record code (trainers/sft_data/messages.py,
mixture.py, formats.py, parts.py): the ShareGPT mapping, each bad message named by row, column and what is
allowed, which parts of a tool conversation carry the loss, and a template that prints no tool call refused.
Parity with TRL on the real tokenizer: tests/trl_gpu/test_trl_parity.py."""

from __future__ import annotations

import json

import pytest

from trainers.sft_data import chat, messages, mixture, parts
from trainers.sft_data.formats import FormatError, Spec, read_record

CALL = {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}


def test_sharegpt_roles_map_onto_trl_messages():
    turns = [{"from": "system", "value": "Be brief."}, {"from": "human", "value": "Weather?"},
             {"from": "function_call", "value": json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}})},
             {"from": "observation", "value": "18C"}, {"from": "gpt", "value": "It is 18C."}]
    read = read_record(Spec.of("sharegpt"), {"conversations": turns}, 1)
    assert list(read.messages) == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather?"},
                                   {"role": "assistant", "content": "", "tool_calls": [CALL]},
                                   {"role": "tool", "content": "18C"}, {"role": "assistant", "content": "It is 18C."}]
    assert read.uses_tools and read.trained_from == 0
    # Its column mapped, its turns as CSV holds them (JSON text), a system prompt added.
    read = read_record(Spec.of("sharegpt", {"conversations": "turns"}, system_prompt="Hi."),
                       {"turns": json.dumps(turns[1:2] + turns[4:])}, 1)
    assert [m["role"] for m in read.messages] == ["system", "user", "assistant"] and not read.uses_tools


@pytest.mark.parametrize("spec, record, expected", [
    (Spec.of("sharegpt"), {"conversations": [{"from": "bot", "value": "x"}]},
     "row 2: column 'conversations' turn 0 is from 'bot', which is no ShareGPT role; expected one of the roles "
     "system, human, user, gpt, assistant, function_call, observation, tool"),
    (Spec.of("sharegpt"), {"conversations": [{"from": "human", "content": "x"}]},
     "row 2: column 'conversations' turn 0 is \"{'from': 'human', 'content': 'x'}\"; expected a list of {from, value}"),
    (Spec.of("sharegpt"), {"conversations": [{"from": "function_call", "value": "get_weather(Paris)"}]},
     "turn 0 is a function_call whose value is not JSON"),
    (Spec.of("sharegpt"), {"messages": []}, "row 2: column 'conversations' is missing (the row has ['messages'])"),
    (Spec.of("conversational"), {"messages": [{"role": "user", "content": "x", "tool_calls": [CALL]}]},
     "message 0 is a user message with tool_calls; expected tool calls on assistant messages only"),
    (Spec.of("conversational"), {"messages": [{"role": "user", "content": "x"},
                                              {"role": "assistant", "tool_calls": [{"function": {"arguments": {}}}]}]},
     "message 1 tool call 0 is"),
    (Spec.of("conversational"), {"messages": [{"role": "user", "content": "x"},
                                              {"role": "assistant", "tool_calls": [{"function": {
                                                  "name": "f", "arguments": "{not json"}}]}]},
     "message 1 tool call 0: arguments '{not json' are not JSON"),
    (Spec.of("conversational"), {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}],
                                 "tools": "[{not json"}, "row 2: column 'tools' holds text that is not a JSON list"),
    (Spec.of("conversational"), {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": ""}]},
     "has an empty assistant answer"),
])  # fmt: skip
def test_a_bad_message_names_the_row_the_column_and_what_is_allowed(spec, record, expected):
    with pytest.raises(FormatError) as err:
        read_record(spec, record, 2)
    assert expected in str(err.value), str(err.value)


def test_arguments_as_json_text_and_a_tools_column_as_json_text_are_read():
    record = {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}],
        "functions": json.dumps([{"type": "function", "function": {"name": "get_weather"}}])}
    read = read_record(Spec.of("conversational", {"tools": "functions"}), record, 1)
    assert read.messages[1]["tool_calls"] == [CALL] and read.tools[0]["function"]["name"] == "get_weather"
    assert messages.shown(read.messages[1]) == 'get_weather({"city": "Paris"})'


def tool_template(history, generation_prompt, tools=None):
    """A Gemma-4-like renderer: tool schemas in a system turn; a call, its result and the answer after it in
    one model turn; the generation prompt opens a model turn."""
    out = "<bos>" + (f"<|turn>system\n{json.dumps(tools)}<turn|>\n" if tools else "")
    open_turn = False
    for m in history:
        if m["role"] == "assistant":
            out += "" if open_turn else "<|turn>model\n"
            calls = "".join(f"<|tool_call>{c['function']['name']}{json.dumps(c['function']['arguments'])}<tool_call|>"
                            for c in m.get("tool_calls", ()))
            out += calls + ("<|tool_response>" if calls else m["content"].strip() + "<turn|>\n")
            open_turn = bool(calls)
        elif m["role"] == "tool":
            out += f"{m['content']}<tool_response|>"
        else:
            out += f"<|turn>{m['role']}\n{m['content'].strip()}<turn|>\n"
    return out + ("<|turn>model\n" if generation_prompt and not open_turn else "")


def test_a_tool_conversation_trains_the_calls_and_answers_and_not_the_tools_results():
    record = {"messages": [{"role": "user", "content": "Weather?"}, {"role": "assistant", "tool_calls": [CALL]},
                           {"role": "tool", "content": "18C"}, {"role": "assistant", "content": "It is 18C."}],
              "tools": [{"type": "function", "function": {"name": "get_weather"}}]}
    example = parts.example(Spec.of("conversational"), record, tool_template, 1)
    assert [t for t, trained in example.parts if trained] == [
        '<|tool_call>get_weather{"city": "Paris"}<tool_call|><|tool_response>', "It is 18C.<turn|>"]
    assert example.text == tool_template(record["messages"], False, record["tools"]).rstrip()
    assert '"name": "get_weather"' in example.parts[0][0]  # the schemas reached the template
    assert parts.example(Spec.of("conversational", loss_on="all"), record, tool_template, 1).parts == (
        (example.text, True),)


def test_a_template_that_prints_no_tool_call_or_no_schema_is_refused_for_tool_records():
    gemma3 = chat.ChatTemplate.named("gemma3", "<bos>", "<eos>").render
    calls = {"messages": [{"role": "user", "content": "Weather?"}, {"role": "assistant", "tool_calls": [CALL]}]}
    with pytest.raises(FormatError, match="row 4: column 'messages' holds tool calls, and the chat template prints "
                                          "no tool call .it would train an empty turn.; expected a model whose chat "
                                          "template renders tool calls and tools"):
        parts.example(Spec.of("conversational"), calls, gemma3, 4)
    schemas = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
               "tools": [{"type": "function", "function": {"name": "get_weather"}}]}
    with pytest.raises(FormatError, match="has tools, and the chat template prints no tool schema"):
        parts.example(Spec.of("conversational"), schemas, gemma3, 4)
    plain = {"messages": schemas["messages"]}  # no tools: the template's business as before
    assert parts.example(Spec.of("conversational"), plain, gemma3, 4).parts[-1] == ("Hello<end_of_turn>", True)


def test_a_mix_flag_round_trips_and_its_weights_become_probabilities():
    value = mixture.flag_value([{"path": "/data/a", "weight": 3, "format": "conversational", "columns": {}},
                                {"path": "/data/b", "weight": 1, "format": "sharegpt",
                                 "columns": {"conversations": "turns"}, "system_prompt": None}])
    assert json.loads(value)[1] == {"path": "/data/b", "weight": 1, "format": "sharegpt",
                                    "columns": {"conversations": "turns"}}
    sources = mixture.parse(value, "all")
    assert [s.spec for s in sources] == [Spec.of("conversational", loss_on="all"),
                                         Spec.of("sharegpt", {"conversations": "turns"}, loss_on="all")]
    assert mixture.probabilities(sources) == [0.75, 0.25] and mixture.trains_some_tokens(sources, "completion")
    with pytest.raises(FormatError, match=r"source 1 \(/data/b\): weight=inf is not a positive number"):
        mixture.parse(value.replace('"weight":1', '"weight":1e999'), "all")
    with pytest.raises(FormatError, match="source 0 .None.: path=None is missing"):
        mixture.parse(json.dumps([{"weight": 1}, {"path": "b", "weight": 1}]), "all")
