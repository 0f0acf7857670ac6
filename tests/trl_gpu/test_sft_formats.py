"""Your own data in the GPU trainer: the three formats on the tokenizers and chat templates of each Gemma
style, the loss mask checked token by token against transformers' own rendering, the shipped Gemma
templates (trainers/sft_data/templates) against the ones TRL ships, and runs of the entry point on
conversational, prompt-completion and text files."""

from __future__ import annotations

import json

import pytest
from datasets import Dataset
from transformers import AutoTokenizer
from transformers.utils.chat_template_utils import render_jinja_template

from trainers import exit_codes
from trainers.sft_data import chat, formats
from trainers.trl_gpu import data

from . import tiny
from .conftest import FAST, STYLE_FIXTURES, run, sft_command, tail

SHIPPED = {"gemma3": "gemma3", "gemma4": "gemma4", "gemma4-31b": "gemma4-31b"}
CHATS = [
    [{"role": "system", "content": " Be brief. "}, {"role": "user", "content": " Hi there "},
     {"role": "assistant", "content": " Hello! "}, {"role": "user", "content": "Q2\n"},
     {"role": "assistant", "content": "A2"}],
    [{"role": "user", "content": "x"}, {"role": "assistant", "content": "<|channel>thought\nhmm<channel|>yes"}],
    [{"role": "user", "content": "only"}],
]  # fmt: skip


@pytest.mark.parametrize("style", tiny.STYLES)
def test_the_shipped_gemma_templates_render_text_chats_as_trls_do(style):
    """What the JAX trainer renders with (no transformers there) is what transformers renders."""
    reference = tiny.chat_template(style)
    shipped = chat.ChatTemplate.named(SHIPPED[style], "<bos>", "<eos>")
    for conversation in CHATS:
        for k in range(1, len(conversation) + 1):
            for generation_prompt in (False, True):
                expected, _ = render_jinja_template(
                    conversations=[conversation[:k]], chat_template=reference, add_generation_prompt=generation_prompt,
                    bos_token="<bos>", eos_token="<eos>",
                )  # fmt: skip
                assert shipped.render(conversation[:k], generation_prompt) == expected[0], (k, generation_prompt)


def support_chat(i: int) -> list[dict]:
    return [{"role": "system", "content": "You answer support tickets."},
            {"role": "user", "content": f"Ticket {i}: my order {100 + i} is late."},
            {"role": "assistant", "content": f"Order {100 + i} ships tomorrow."},
            {"role": "user", "content": "Thanks!"},
            {"role": "assistant", "content": "You are welcome."}]  # fmt: skip


@pytest.mark.parametrize("style", tiny.STYLES)
def test_every_assistant_turn_and_only_those_carry_the_loss_token_by_token(style, request):
    tokenizer = AutoTokenizer.from_pretrained(request.getfixturevalue(STYLE_FIXTURES[style]))
    messages, marker = support_chat(3), tiny.END_OF_TURN[style]
    example = data.tokenize_example({"messages": messages}, tokenizer, formats.Spec.of("conversational"))
    ids, labels = example["input_ids"], example["labels"]
    # The sequence is the last turn's generation prompt, as inference tokenizes it, then the answer.
    prompt_ids = tokenizer.apply_chat_template(messages[:-1], tokenize=True, return_dict=True,
                                               add_generation_prompt=True)["input_ids"]
    assert ids[: len(prompt_ids)] == list(prompt_ids)
    assert tokenizer.decode(ids[len(prompt_ids):]) == "You are welcome." + marker
    # Token by token: a label is its token inside an assistant turn (content and marker), -100 elsewhere.
    trained_runs, current = [], []
    for token, label in zip(ids, labels):
        assert label in (data.IGNORE_INDEX, token)
        if label == data.IGNORE_INDEX and current:
            trained_runs.append(current)
            current = []
        elif label != data.IGNORE_INDEX:
            current.append(token)
    trained_runs.append(current)
    assert [tokenizer.decode(r) for r in trained_runs] == [f"Order 103 ships tomorrow.{marker}",
                                                          f"You are welcome.{marker}"]
    # The first turn's tokens are those of the conversation as the template renders it.
    history = tokenizer.apply_chat_template(messages[:3], tokenize=True, return_dict=True)["input_ids"]
    first_end = ids.index(trained_runs[0][-1]) + 1
    assert ids[:first_end] == list(history)[:first_end]
    everything = data.tokenize_example({"messages": messages}, tokenizer,
                                       formats.Spec.of("conversational", loss_on="all"))
    assert everything["input_ids"] == ids and everything["labels"] == ids


def test_plain_text_and_plain_prompt_completion_are_bracketed_by_bos_and_a_trained_eos(gemma4_dir):
    tokenizer = AutoTokenizer.from_pretrained(gemma4_dir)
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    text = data.tokenize_example({"body": "SELECT a FROM t"}, tokenizer, formats.Spec.of("text", {"text": "body"}))
    body = tokenizer("SELECT a FROM t", add_special_tokens=False)["input_ids"]
    assert text["input_ids"] == [bos, *body, eos] and text["labels"] == [-100, *body, eos]
    pc = data.tokenize_example({"q": "SELECT", "a": " a FROM t"}, tokenizer,
                               formats.Spec.of("prompt-completion", {"prompt": "q", "completion": "a"}))
    prompt = tokenizer("SELECT", add_special_tokens=False)["input_ids"]
    completion = tokenizer(" a FROM t", add_special_tokens=False)["input_ids"]
    assert pc["input_ids"] == [bos, *prompt, *completion, eos]
    assert pc["labels"] == [-100] * (1 + len(prompt)) + [*completion, eos]


def _write(path, rows):
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif path.suffix == ".parquet":
        Dataset.from_list(rows).to_parquet(str(path))
    elif path.suffix == ".csv":
        Dataset.from_list(rows).to_csv(str(path))
    else:
        path.write_text("\n<|endoftext|>\n".join(r["text"] for r in rows))
    return path


def _without_sql_flags(flags: list) -> list:
    """FAST without the text-to-SQL run's data settings."""
    out, skip = [], False
    for flag in flags:
        if skip:
            skip = False
        elif flag in tiny.DATA_KEYS.values():
            skip = True
        else:
            out.append(flag)
    return out


CASES = {
    "conversational.parquet": (["--data_format", "conversational"], lambda i: {"messages": support_chat(i)}),
    "prompt-completion.csv": (["--data_format", "prompt-completion", "--columns", "completion=answer",
                               "--prompt_template", "Ticket: {question}"],
                              lambda i: {"question": f"order {i} late", "answer": f"Order {i} ships tomorrow."}),
    "text.txt": (["--data_format", "text"], lambda i: {"text": f"Order {i} ships tomorrow. Thanks for waiting."}),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_entry_point_trains_on_each_format_and_file_type(case, gemma3_dir, tmp_path):
    flags, row = CASES[case]
    dataset = _write(tmp_path / case, [row(i) for i in range(80)])
    proc = run(sft_command(*_without_sql_flags(FAST), "--model_id", gemma3_dir, "--dataset_name", dataset,
                           "--output_dir", tmp_path / "run", "--max_steps", "12", "--eval_strategy", "no",
                           "--save_steps", "12", *flags))  # fmt: skip
    assert proc.returncode == exit_codes.OK, tail(proc)
    assert (tmp_path / "run" / "adapter_model.safetensors").is_file()
    history = json.loads((tmp_path / "run" / "checkpoint-12" / "trainer_state.json").read_text())["log_history"]
    losses = [entry["loss"] for entry in history if "loss" in entry]
    assert len(losses) == 6 and losses[-1] < losses[0], losses


def test_a_mapping_to_a_missing_column_and_a_wrong_format_exit_78(gemma4_dir, tmp_path, capsys):
    from trainers.trl_gpu.sft import main

    chats = _write(tmp_path / "chats.jsonl", [{"messages": support_chat(i)} for i in range(4)])
    code = main([str(a) for a in (*_without_sql_flags(FAST), "--model_id", gemma4_dir, "--dataset_name", chats,
                                  "--output_dir", tmp_path / "o", "--data_format", "prompt-completion")])
    err = capsys.readouterr().err
    assert code == exit_codes.CONFIG_ERROR
    assert "row 1: column 'prompt' is missing (the row has ['messages'])" in err
    code = main([str(a) for a in (*_without_sql_flags(FAST), "--model_id", gemma4_dir, "--dataset_name", chats,
                                  "--output_dir", tmp_path / "o", "--data_format", "chat")])
    assert code == exit_codes.CONFIG_ERROR and "--data_format" in capsys.readouterr().err
    # A field inside a field or a conversion: refused at start-up (exit 78), never a crash that restarts the pod
    # (rows that have the column: str.format would look {w} up in each and raise KeyError).
    rows = _write(tmp_path / "pc.jsonl", [{"q": f"question {i}", "completion": "answer"} for i in range(4)])
    for template in ("{q:{w}}", "{q!r}", "{q:>10}"):
        code = main([str(a) for a in (*_without_sql_flags(FAST), "--model_id", gemma4_dir, "--dataset_name", rows,
                                      "--output_dir", tmp_path / "o", "--data_format", "prompt-completion",
                                      "--prompt_template", template)])
        err = capsys.readouterr().err
        assert code == exit_codes.CONFIG_ERROR and "--prompt_template" in err and template in err, err
