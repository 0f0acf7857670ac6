"""The data formats both trainers take (trainers/sft_data/formats.py, parts.py, records.py): the settings' problems,
each record's checks (row, column, what was expected), and which parts of a chat carry the loss.

The chat template here is a small Python renderer in Gemma 3's turn format; the real templates (and the
trainers' tokenizers) are checked in tests/trl_gpu/test_sft_formats.py and tests/gemma_jax/test_sft_data.py."""

from __future__ import annotations

import json

import pytest

from trainers.sft_data import formats, parts, records
from trainers.sft_data.formats import FormatError, Spec

SYSTEM = {"role": "system", "content": "Be brief."}


def gemma3_style(messages, generation_prompt):
    """Gemma 3's turns: system folded into the first user turn, contents trimmed."""
    opening = ""
    if messages and messages[0]["role"] == "system":
        opening, messages = messages[0]["content"] + "\n\n", messages[1:]
    out = "<bos>"
    for i, m in enumerate(messages):
        role = "model" if m["role"] == "assistant" else m["role"]
        out += f"<start_of_turn>{role}\n{opening if i == 0 else ''}{m['content'].strip()}<end_of_turn>\n"
    return out + ("<start_of_turn>model\n" if generation_prompt else "")


def thought_in_prompt(messages, generation_prompt):
    """Gemma 4 31B's behaviour: the generation prompt adds an empty thought block a past turn lacks."""
    out = gemma3_style(messages, False).replace("<start_of_turn>", "<|turn>").replace("<end_of_turn>", "<turn|>")
    return out + ("<|turn>model\n<|channel>thought\n<channel|>" if generation_prompt else "")


def trained(pieces):
    return [text for text, is_trained in pieces if is_trained]


# --- settings -----------------------------------------------------------------------------------

@pytest.mark.parametrize("settings, setting, why", [
    (("chat", {}, None, None, "completion"), "format", "is not a data format"),
    (("text", {"prompt": "q"}, None, None, "completion"), "columns", "not a column of format text"),
    (("prompt-completion", {"answer": "a"}, None, None, "completion"), "columns", "'answer'"),
    (("conversational", {}, "{q}", None, "completion"), "prompt_template", "format conversational has none"),
    (("prompt-completion", {"prompt": "q"}, "{q}", None, "completion"), "prompt_template", "both say where"),
    (("prompt-completion", {}, "no fields", None, "completion"), "prompt_template", "reads no column"),
    (("prompt-completion", {}, "{} and {0}", None, "completion"), "prompt_template", "positional field"),
    (("prompt-completion", {}, "{row.name}", None, "completion"), "prompt_template", "attribute or index"),
    (("prompt-completion", {}, "{q:{w}}", None, "completion"), "prompt_template", "has a field inside it"),
    (("prompt-completion", {}, "{q!r}", None, "completion"), "prompt_template", "has a conversion (!r)"),
    (("prompt-completion", {}, "{q:>10}", None, "completion"), "prompt_template", "has a format spec (:>10)"),
    (("prompt-completion", {}, "{q", None, "completion"), "prompt_template", "expected '}' before end"),
    (("text", {}, None, "Be brief.", "completion"), "system_prompt", "format text is none"),
    (("text", {}, None, None, "answers"), "loss_on", "is not a loss setting"),
])
def test_bad_settings_name_the_setting_and_what_is_allowed(settings, setting, why):
    problems = formats.settings_problems(*settings)
    assert [p.setting for p in problems] == [setting]
    assert why in problems[0].why and problems[0].allowed
    with pytest.raises(FormatError, match=setting):
        Spec.of(*settings)


def test_columns_flag_round_trips_and_refuses_what_it_cannot_read():
    assert formats.parse_columns("prompt=question, completion=answer") == {"prompt": "question", "completion": "answer"}
    assert formats.format_columns({"prompt": "q", "completion": "a"}) == "prompt=q,completion=a"
    assert formats.parse_columns("") == {}
    for bad in ("prompt", "prompt=", "=q", "prompt=a,prompt=b"):
        with pytest.raises(ValueError):
            formats.parse_columns(bad)


def test_a_template_reads_its_fields_and_the_completion():
    spec = Spec.of("prompt-completion", {"completion": "sql"}, "{context}\n{question} ({context})")
    assert spec.needed_columns() == ["context", "question", "sql"]
    assert Spec.of("prompt-completion", {"prompt": "q"}).needed_columns() == ["q", "completion"]


# --- records ------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec, record, message", [
    (Spec.of("text"), {"body": "x"}, "row 3: column 'text' is missing (the row has ['body']); expected a string"),
    (Spec.of("text"), {"text": 7}, "row 3: column 'text' is int '7'; expected a string"),
    (Spec.of("text"), ["x"], "row 3: is a list, not a record of columns"),
    (Spec.of("conversational"), {"messages": "hello"}, "column 'messages' is str 'hello'; expected a list of"),
    (Spec.of("conversational"), {"messages": [{"role": "bot", "content": "x"}]},
     "row 3: column 'messages' message 0 has role 'bot'; expected one of the roles system, user, assistant, tool"),
    (Spec.of("conversational"), {"messages": [{"role": "user", "content": "x"}]},
     "ends with a user message; expected the conversation to end with an assistant message"),
    (Spec.of("conversational", {"messages": "chat"}), {"messages": []}, "column 'chat' is missing"),
    (Spec.of("prompt-completion", {"prompt": "question", "completion": "reply"}), {"question": "q", "answer": "a"},
     "row 3: column 'reply' is missing (the row has ['answer', 'question'])"),
    (Spec.of("prompt-completion", {"completion": "sql"}, "{schema} {question}"), {"question": "q", "sql": "s"},
     "column 'schema' is missing (the row has ['question', 'sql']); expected a value for {schema} of the prompt"),
])
def test_a_record_that_does_not_fit_names_the_row_the_column_and_what_was_expected(spec, record, message):
    with pytest.raises(FormatError) as err:
        formats.check_rows(spec, [record], first=3)
    assert message in str(err.value)


def test_messages_in_a_csv_cell_are_json():
    chat = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    read = formats.read_record(Spec.of("conversational"), {"messages": json.dumps(chat)}, 1)
    assert list(read.messages) == chat


# --- which parts carry the loss -----------------------------------------------------------------

def test_plain_text_and_plain_prompt_completion():
    assert parts.example(Spec.of("text"), {"text": "Once."}, None).parts == (("Once.", True),)
    spec = Spec.of("prompt-completion")
    example = parts.example(spec, {"prompt": "The sky is", "completion": " blue."}, None)
    assert example.parts == (("The sky is", False), (" blue.", True)) and not example.chat
    everything = parts.example(Spec.of("prompt-completion", loss_on="all"), {"prompt": "a", "completion": "b"}, None)
    assert everything.parts == (("a", True), ("b", True))


def test_a_conversation_trains_every_assistant_turn_with_its_end_of_turn_marker():
    chat = [SYSTEM, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": " Hello! "},
            {"role": "user", "content": "Sum?"}, {"role": "assistant", "content": "4"}]
    example = parts.example(Spec.of("conversational"), {"messages": chat}, gemma3_style)
    assert example.chat and trained(example.parts) == ["Hello!<end_of_turn>", "4<end_of_turn>"]
    # The text is the last turn's generation prompt, then its answer: the history as the template renders it.
    assert example.text == gemma3_style(chat[:-1], True) + "4<end_of_turn>"
    assert example.text + "\n" == gemma3_style(chat, False)  # the newline after the last marker is never trained
    everything = parts.example(Spec.of("conversational", loss_on="all"), {"messages": chat}, gemma3_style)
    assert everything.parts == ((example.text, True),)


def test_prompt_completion_trains_the_completion_only_and_a_system_prompt_opens_the_chat():
    spec = Spec.of("prompt-completion", {"completion": "sql"}, "{schema}\n{question}", system_prompt="Write SQL.")
    example = parts.example(spec, {"schema": "T(a)", "question": "All a?", "sql": "SELECT a FROM T"}, gemma3_style)
    assert trained(example.parts) == ["SELECT a FROM T<end_of_turn>"]
    assert example.text.startswith("<bos><start_of_turn>user\nWrite SQL.\n\nT(a)\nAll a?<end_of_turn>\n")
    history = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
    chat = {"prompt": [*history, {"role": "user", "content": "and 3+3?"}],
            "completion": [{"role": "assistant", "content": "6"}]}
    pieces = parts.example(Spec.of("prompt-completion"), chat, gemma3_style).parts
    assert trained(pieces) == ["6<end_of_turn>"]  # the prompt's own assistant turn is context


def test_the_last_turn_follows_the_generation_prompt_as_inference_renders_it():
    chat = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"},
            {"role": "user", "content": "Again"}, {"role": "assistant", "content": "Yo"}]
    example = parts.example(Spec.of("conversational"), {"messages": chat}, thought_in_prompt)
    assert example.text == thought_in_prompt(chat[:-1], True) + "Yo<turn|>"
    assert trained(example.parts) == ["Yo<turn|>", "Yo<turn|>"]
    assert example.text.endswith("<|channel>thought\n<channel|>Yo<turn|>")


def test_templates_that_cannot_be_masked_are_template_problems():
    def no_marker(messages, generation_prompt):
        return "".join(m["content"] for m in messages)

    def answer_changes_the_prompt(messages, generation_prompt):
        answered = messages[-1]["role"] == "assistant"
        return gemma3_style(messages, generation_prompt).replace("user\n", "user (answered)\n" if answered else "user\n")

    chat = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    with pytest.raises(formats.TemplateProblem, match="no end-of-turn marker"):
        parts.example(Spec.of("conversational"), chat, no_marker)
    with pytest.raises(formats.TemplateProblem, match="renders the prompt turns differently"):
        parts.example(Spec.of("conversational"), chat, answer_changes_the_prompt)


def test_prompt_and_answer_for_a_generation_check():
    spec = Spec.of("prompt-completion", {"completion": "sql"}, "{question}")
    prompt, answer = parts.prompt_and_answer(spec, {"question": "All?", "sql": "SELECT *"})
    assert prompt == [{"role": "user", "content": "All?"}] and answer == "SELECT *"
    assert parts.prompt_and_answer(Spec.of("prompt-completion"), {"prompt": "a", "completion": "b"}) == ("a", "b")


# --- files --------------------------------------------------------------------------------------

def test_records_from_jsonl_json_csv_text_and_a_directory(tmp_path):
    rows = [{"prompt": f"p{i}", "completion": f"c{i}"} for i in range(3)]
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "d" / "b.json").write_text(json.dumps(rows))
    (tmp_path / "d" / "c.csv").write_text("prompt,completion\n" + "".join(f"{r['prompt']},{r['completion']}\n" for r in rows))
    (tmp_path / "d" / ".staged.json").write_text("{}")  # the staging's record, never data
    assert records.read_records(tmp_path / "d") == rows * 3
    assert records.read_records(tmp_path / "d", limit=4) == rows + rows[:1]
    text = tmp_path / "stories.txt"
    text.write_text("One.\n<|endoftext|>\nTwo.\n<|endoftext|>\n")
    assert records.read_records(text) == [{"text": "One."}, {"text": "Two."}]


def test_unreadable_paths_say_why(tmp_path):
    (tmp_path / "x.xlsx").write_text("")
    (tmp_path / "empty").mkdir()
    (tmp_path / "bad.jsonl").write_text('{"a": 1}\nnot json\n')
    with pytest.raises(records.RecordsError, match="unsupported file type '.xlsx'"):
        records.read_records(tmp_path / "x.xlsx")
    with pytest.raises(records.RecordsError, match="no data file"):
        records.read_records(tmp_path / "empty")
    with pytest.raises(records.RecordsError, match="no such file"):
        records.read_records(tmp_path / "absent.jsonl")
    with pytest.raises(records.RecordsError, match="line 2 is not JSON"):
        records.read_records(tmp_path / "bad.jsonl")


# --- what both trainers do with the settings and the parts -------------------------------------------


def test_the_flags_data_settings_are_one_spec_or_one_error_naming_the_flags():
    from types import SimpleNamespace

    from trainers.exit_codes import ConfigError

    flags = SimpleNamespace(data_format="prompt-completion", columns="prompt=question", prompt_template=None,
                            system_prompt="Be brief.", loss_on="completion")
    assert formats.spec_of_flags(flags) == Spec.of("prompt-completion", "prompt=question", None, "Be brief.")
    with pytest.raises(ConfigError, match=r"data settings \(--data_format, --columns, --prompt_template, "
                                          r"--system_prompt, --loss_on\): loss_on='some' is not a loss setting"):
        formats.spec_of_flags(SimpleNamespace(**{**vars(flags), "loss_on": "some"}))


def _letters(text: str) -> list[int]:
    return [ord(c) for c in text]


def test_plain_text_tokens_are_bos_text_eos_and_the_eos_trains_with_the_last_part():
    example = parts.Example((("ab", False), ("c", True)), chat=False)
    assert example.tokens(_letters, 1, 2) == ([1, 97, 98, 99, 2], [False, False, False, True, True])
    untrained = parts.Example((("ab", True), ("c", False)), chat=False)
    assert untrained.tokens(_letters, 1, 2)[1] == [False, True, True, False, False]


def test_a_tokenizer_without_bos_or_eos_adds_none_and_a_chat_rendering_gets_none():
    plain = parts.Example((("ab", True),), chat=False)
    assert plain.tokens(_letters, None, None) == ([97, 98], [True, True])
    chat = parts.Example((("<x", False), ("y>", True)), chat=True)
    assert chat.tokens(_letters, 1, 2) == (_letters("<xy>"), [False, False, True, True])
