"""Chat templates (--chat_template, the prompt/answer split of each Gemma
style, template errors exit 78), the SQL check's scoring and stop tokens,
and the throughput figure."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from trainers import exit_codes
from trainers.trl_gpu import evaluation, sql_exec, templates
from trainers.trl_gpu.args import ConfigError
from trainers.trl_gpu.sft import main
from trainers.trl_gpu.trainer import Throughput

from . import tiny
from .conftest import FAST, STYLE_FIXTURES

QUESTION = [{"role": "user", "content": "How many orders?"}]


@pytest.mark.parametrize("style", tiny.STYLES)
def test_split_turn_is_the_generation_prompt_then_answer_and_end_of_turn(style, request):
    tokenizer = AutoTokenizer.from_pretrained(request.getfixturevalue(STYLE_FIXTURES[style]))
    prompt, completion = templates.split_turn(tokenizer, QUESTION, "SELECT count(*) FROM orders;")
    assert prompt == tokenizer.apply_chat_template(QUESTION, tokenize=False, add_generation_prompt=True)
    assert completion == "SELECT count(*) FROM orders;" + tiny.END_OF_TURN[style]
    assert templates.end_of_turn_marker(tokenizer) == tiny.END_OF_TURN[style]


def test_the_31b_style_prompt_is_not_a_prefix_of_the_rendered_conversation(gemma4_31b_dir):
    # The case that made the old prefix check raise: training now follows the prompt.
    tokenizer = AutoTokenizer.from_pretrained(gemma4_31b_dir)
    prompt = tokenizer.apply_chat_template(QUESTION, tokenize=False, add_generation_prompt=True)
    full = tokenizer.apply_chat_template(QUESTION + [{"role": "assistant", "content": "SELECT 1;"}], tokenize=False)
    assert prompt.endswith(tiny.EMPTY_THOUGHT) and not full.startswith(prompt)
    assert tiny.EMPTY_THOUGHT not in full


def test_known_names_and_files(tmp_path):
    assert {"gemma3", "gemma4_v5"} <= set(templates.known_templates())
    assert not any(name.endswith("_training") for name in templates.known_templates())
    assert "<start_of_turn>" in templates.resolve("gemma3")
    custom = tmp_path / "mine.jinja"
    custom.write_text("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    assert templates.resolve(str(custom)) == custom.read_text()
    with pytest.raises(ConfigError, match=r"--chat_template='gemma9'.*known: \["):
        templates.resolve("gemma9")


def _broken_template(tmp_path):
    """A template whose prompt turns change once an answer follows them."""
    path = tmp_path / "broken.jinja"
    path.write_text(
        "{% for m in messages %}<|turn>{{ m['role'] }}"
        "{% if m['role'] == 'user' and messages[-1]['role'] == 'assistant' %} (answered){% endif %}\n"
        "{{ m['content'] }}<turn|>\n{% endfor %}{% if add_generation_prompt %}<|turn>model\n{% endif %}"
    )
    return path


def test_a_template_this_trainer_cannot_mask_exits_78(capsys, gemma4_dir, sql_file, tmp_path):
    code = main([*FAST, "--model_id", str(gemma4_dir), "--dataset_name", str(sql_file), "--output_dir",
                 str(tmp_path / "run"), "--max_steps", "1", "--chat_template", str(_broken_template(tmp_path))])  # fmt: skip
    err = capsys.readouterr().err
    assert code == exit_codes.CONFIG_ERROR, err
    assert "renders the prompt turns differently" in err and "--chat_template" in err


def test_stop_on_the_template_marker_even_when_it_is_no_special_token(gemma4_dir):
    tokenizer = AutoTokenizer.from_pretrained(gemma4_dir)
    tokenizer.chat_template = tokenizer.chat_template.replace("<turn|>", "[END]")
    model = type("M", (), {"generation_config": type("G", (), {"eos_token_id": None})()})()
    stop, marker = evaluation.stopping(tokenizer, model)
    assert marker == "[END]"
    assert stop["stop_strings"] == ["[END]"]  # several tokens: stopped on the string
    tokenizer = AutoTokenizer.from_pretrained(gemma4_dir)
    stop, marker = evaluation.stopping(tokenizer, model)
    assert marker == "<turn|>" and tokenizer.convert_tokens_to_ids("<turn|>") in stop["eos_token_id"]


CONTEXT = (
    "CREATE TABLE orders (id INTEGER, city TEXT, amount REAL);"
    "INSERT INTO orders VALUES (1, 'Lyon', 10.0), (2, 'Paris', 25.5), (3, 'Lyon', 7.25);"
)


@pytest.mark.parametrize(
    "reference, generated, expected",
    [
        ("SELECT id FROM orders WHERE city = 'Lyon';", "select id from orders where amount < 20", True),
        ("SELECT id FROM orders WHERE city = 'Lyon'", "SELECT id FROM orders WHERE city = 'Paris'", False),
        ("SELECT id FROM orders ORDER BY amount DESC", "SELECT id FROM orders ORDER BY amount", False),
        ("SELECT id FROM orders", "SELECT id FROM orders ORDER BY id DESC", True),  # order only matters when asked
        ("SELECT SUM(amount) FROM orders", "SELECT 42.75", True),
        ("SELECT id FROM orders", "SELEC id FROM orders", False),  # fails to run
        ("DELETE FROM orders WHERE city = 'Paris'", "DELETE FROM orders WHERE amount > 20", True),
        ("DELETE FROM orders WHERE city = 'Paris'", "DELETE FROM orders WHERE amount < 20", False),
        ("SELECT nope FROM orders", "SELECT id FROM orders", None),  # the reference itself fails: unscorable
        ("SELECT id FROM orders", "DROP TABLE orders", False),
    ],
)
def test_execution_match(reference, generated, expected):
    assert sql_exec.execution_match(CONTEXT, reference, generated) is expected


def test_execution_match_stops_a_runaway_query():
    runaway = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n"
    assert sql_exec.execution_match(CONTEXT, "SELECT 1", runaway) is False


def test_summary_keeps_both_scores():
    results = [
        {"match": True, "execution_match": True},
        {"match": False, "execution_match": True},
        {"match": False, "execution_match": None},
        {"match": False, "execution_match": False},
    ]
    report = evaluation.summarize(results)
    assert report["sql_exact_match"] == 0.25
    assert report["sql_execution_match"] == pytest.approx(2 / 3) and report["execution_scorable"] == 3


def test_prompts_are_split_across_ranks_in_equal_shares():
    rows = list(range(7))
    shares = [evaluation._share(rows, rank, 3) for rank in range(3)]
    assert [len(share) for share, _ in shares] == [3, 3, 3]  # same number of generate calls per rank
    assert sorted(r for share, real in shares for r in share[:real]) == rows


def test_throughput_leaves_out_evaluation_and_saving(monkeypatch):
    clock = iter([0.0, 10.0])
    monkeypatch.setattr("trainers.trl_gpu.trainer.time.perf_counter", lambda: next(clock))
    meter = Throughput()
    meter.on_train_begin(None, type("S", (), {"num_input_tokens_seen": 0})(), None)
    meter.pause(6.0)  # an evaluation and a save inside the 10 s
    assert meter.measure(1000) == {"tokens_per_second": 250.0}
