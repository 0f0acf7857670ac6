"""Parity with TRL 1.16's own SFTTrainer, on the real Gemma 3 tokenizer (the GGUF of Gemma 3 270M, through
transformers' GGUF reader) and TRL's own Gemma 3 training template: for each format and loss, the GPU
trainer's input ids and trained positions against those of a real SFTTrainer's dataset and collator, and
each difference exactly as docs/own-data.md ("Parity with TRL") states it; ShareGPT records and tool calls
(with TRL's Gemma 4 template, which renders them, and the Gemma 3 one, which does not).

Trained positions are those whose label is kept; position 0 is never a target (the model predicts
position i from those before it), so it is left out of the comparison: TRL keeps BOS's label, the
trainer masks it, and neither trains it."""

from __future__ import annotations

from pathlib import Path

import pytest
import trl
from datasets import Dataset
from transformers import AutoTokenizer, Gemma3ForCausalLM, Gemma3TextConfig
from trl import SFTConfig, SFTTrainer

from trainers.sft_data import formats
from trainers.trl_gpu import data

from . import tiny

HI, HELLO = {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}


@pytest.fixture(scope="module")
def tokenizer():
    tok = AutoTokenizer.from_pretrained(tiny.cached_real_gemma3_tokenizer_dir())  # read from the GGUF once per machine
    # The GGUF ships no chat template; TRL's Gemma 3 one, with the generation marks its assistant-only loss needs.
    tok.chat_template = (Path(trl.__file__).parent / "chat_templates" / "gemma3_training.jinja").read_text()
    return tok


def _trl(tok, record: dict, **config) -> tuple[list[int], list[int]]:
    """input ids and trained positions (from 1) of a real SFTTrainer on one record."""
    model = Gemma3ForCausalLM(Gemma3TextConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32,
                                               num_hidden_layers=1, num_attention_heads=1,
                                               num_key_value_heads=1, head_dim=16))
    args = SFTConfig(output_dir="unused", report_to=[], max_length=None, use_cpu=True, bf16=False, **config)
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list([record]), processing_class=tok)
    batch = trainer.data_collator([trainer.train_dataset[0]])
    ids, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
    return ids, [i for i, label in enumerate(labels) if label != -100 and i > 0]


def _ours(tok, record: dict, fmt: str, loss: str = "completion") -> tuple[list[int], list[int]]:
    out = data.tokenize_example(record, tok, formats.Spec.of(fmt, loss_on=loss))
    return out["input_ids"], [i for i, label in enumerate(out["labels"]) if label != -100 and i > 0]


@pytest.mark.parametrize("record, fmt, loss, config", [
    ({"text": "The sky is blue.\n"}, "text", "completion", {}),
    ({"prompt": "The sky is", "completion": " blue."}, "prompt-completion", "completion", {}),
    ({"prompt": "The sky is", "completion": " blue.\n"}, "prompt-completion", "all", {"completion_only_loss": False}),
])  # fmt: skip
def test_plain_text_and_plain_prompt_completion_are_tokenized_and_trained_as_trl_does(tokenizer, record, fmt,
                                                                                   loss, config):
    assert _ours(tokenizer, record, fmt, loss) == _trl(tokenizer, record, **config)


@pytest.mark.parametrize("record, fmt, loss, config", [
    ({"messages": [HI, HELLO]}, "conversational", "completion", {"assistant_only_loss": True}),
    ({"messages": [HI, HELLO, {"role": "user", "content": "More?"}, {"role": "assistant", "content": "No."}]},
     "conversational", "completion", {"assistant_only_loss": True}),
    ({"messages": [HI, HELLO]}, "conversational", "all", {}),
    ({"prompt": [HI], "completion": [HELLO]}, "prompt-completion", "completion", {}),
])  # fmt: skip
def test_a_chat_is_trained_as_trl_does_but_for_the_newline_after_each_trained_end_of_turn(tokenizer, record, fmt,
                                                                                      loss, config):
    ours_ids, ours_trained = _ours(tokenizer, record, fmt, loss)
    trl_ids, trl_trained = _trl(tokenizer, record, **config)
    newline = tokenizer.convert_tokens_to_ids("\n")
    # TRL keeps the template's "\n" after the final <end_of_turn> and trains the "\n" after every trained
    # <end_of_turn>; the trainer ends the example at <end_of_turn>, where generation stops, and trains no
    # such newline.
    eot = tokenizer.convert_tokens_to_ids("<end_of_turn>")
    newlines = [i + 1 for i in ours_trained if ours_ids[i] == eot]
    assert trl_ids == ours_ids + [newline]
    assert trl_trained == sorted({*ours_trained, *newlines})
    assert tokenizer.convert_ids_to_tokens(ours_ids[-1]) == "<end_of_turn>"


@pytest.mark.parametrize("record, fmt, config, why, trl_trains", [
    ({"messages": [HI, {"role": "assistant", "content": ""}]}, "conversational", {"assistant_only_loss": True},
     "has an empty assistant answer", ["<end_of_turn>", "\n"]),
    ({"prompt": [HI], "completion": [HELLO, {"role": "user", "content": "thanks"}, {"role": "assistant",
                                                                                  "content": "Bye."}]},
     "prompt-completion", {}, "holds a user turn, which TRL trains as the model's words", ["thanks"]),
    ({"prompt": "The sky is ", "completion": "blue."}, "prompt-completion", {},
     "ends in a space or tab, which the tokenizer joins to the completion's first word", ["▁blue"]),
])  # fmt: skip
def test_what_trl_would_train_other_than_the_answer_is_refused_with_the_reason(tokenizer, record, fmt, config,
                                                                             why, trl_trains):
    with pytest.raises(formats.FormatError, match=why):
        _ours(tokenizer, record, fmt)
    ids, trained = _trl(tokenizer, record, **config)
    tokens = [tokenizer.convert_ids_to_tokens(ids[i]) for i in trained]
    assert all(t in tokens for t in trl_trains), tokens  # what TRL would make a target


# --- ShareGPT and tool calls ---------------------------------------------------------------------

WEATHER = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                             "parameters": {"type": "object", "properties": {
                                                 "city": {"type": "string"}}, "required": ["city"]}}}]
CALL = {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                                                              "arguments": {"city": "Paris"}}}]}
ASK = {"role": "user", "content": "Weather in Paris?"}
RESULT = {"role": "tool", "name": "get_weather", "content": "18C"}
ANSWER = {"role": "assistant", "content": "It is 18C."}


@pytest.fixture(scope="module")
def gemma4_text(tokenizer):
    """The Gemma 3 tokenizer with TRL's Gemma 4 template, which renders tool calls and tool schemas (its markers
    are plain text to this vocabulary, the same text for both sides)."""
    tok = AutoTokenizer.from_pretrained(tokenizer.name_or_path)
    tok.chat_template = (Path(trl.__file__).parent / "chat_templates" / "gemma4.jinja").read_text()
    return tok


def test_a_sharegpt_record_is_the_conversation_it_maps_to(tokenizer):
    turns = [{"from": "system", "value": "Be brief."}, {"from": "human", "value": "Hi"}, {"from": "gpt",
                                                                                       "value": "Hello."}]
    mapped = [{"role": "system", "content": "Be brief."}, HI, HELLO]
    ours = _ours(tokenizer, {"conversations": turns}, "sharegpt")
    assert ours == _ours(tokenizer, {"messages": mapped}, "conversational")
    trl_ids, _ = _trl(tokenizer, {"messages": mapped}, assistant_only_loss=True)
    assert trl_ids == ours[0] + [tokenizer.convert_tokens_to_ids("\n")]


def test_a_tool_call_completion_is_trained_as_trl_does_with_a_template_that_renders_calls(gemma4_text):
    record = {"prompt": [ASK], "completion": [CALL], "tools": WEATHER}
    ids, trained = _ours(gemma4_text, record, "prompt-completion")
    assert (ids, trained) == _trl(gemma4_text, record)
    text = gemma4_text.decode(ids)
    assert "declaration:get_weather" in text  # the tools column reached the template, as TRL passes it
    # Gemma 4 opens the tool's response after a call: generation stops there, so it is the call's end.
    assert gemma4_text.decode([ids[i] for i in trained]) == \
        '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|><|tool_response>'


def test_a_whole_tool_conversation_trains_the_calls_and_answers_not_the_tool_s_result(gemma4_text):
    record = {"messages": [ASK, CALL, RESULT, ANSWER], "tools": WEATHER}
    ids, trained = _ours(gemma4_text, record, "conversational")
    assert gemma4_text.decode([ids[i] for i in trained]) == ('<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}'
                                                             "<tool_call|><|tool_response>It is 18C.<turn|>")
    # Every token trained (loss: all): TRL's ids, less the newline after the last end of turn, as for any chat.
    all_ids, _ = _ours(gemma4_text, record, "conversational", "all")
    trl_ids, _ = _trl(gemma4_text, record)
    assert trl_ids == all_ids + [gemma4_text.convert_tokens_to_ids("\n")] and all_ids == ids


def test_tool_records_trl_would_train_wrongly_are_refused_with_the_reason(tokenizer, gemma4_text):
    # The Gemma 3 template prints each message's content only: TRL trains the call as an empty turn.
    record = {"messages": [ASK, CALL], "tools": WEATHER}
    with pytest.raises(formats.FormatError, match="holds tool calls, and the chat template prints no tool call"):
        _ours(tokenizer, record, "conversational")
    ids, trained = _trl(tokenizer, record, assistant_only_loss=True)
    assert "get_weather" not in tokenizer.decode(ids)
    assert [tokenizer.convert_ids_to_tokens(ids[i]) for i in trained] == ["<end_of_turn>", "\n"]
    # A completion holding the tool's result: TRL trains it as the model's words.
    record = {"prompt": [ASK], "completion": [CALL, RESULT, ANSWER], "tools": WEATHER}
    with pytest.raises(formats.FormatError, match="holds a tool turn, which TRL trains as the model's words"):
        _ours(gemma4_text, record, "prompt-completion")
    ids, trained = _trl(gemma4_text, record)
    assert 'response:get_weather{value:<|"|>18C<|"|>}' in gemma4_text.decode([ids[i] for i in trained])
