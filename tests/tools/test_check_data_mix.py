"""A run that mixes several local datasets (`mix`) and ShareGPT records: `make check-data` reads every
dataset of the mix, each with its own format, and `make plan`'s first-rows check refuses a bad row of any
of them naming the source's key, the file and the row."""

from __future__ import annotations

import json

from admission import local_data
from stack.reader import load_files
from tests.support.check_data_stack import check as run_check, write_stack
from tools.data import check
from trainers.sft_data import formats

CHAT = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]}
SHARED = {"conversations": [{"from": "system", "value": "Be brief."}, {"from": "human", "value": "Hi"},
                            {"from": "gpt", "value": "Hello."}]}
TOOLS = {"messages": [{"role": "user", "content": "Weather in Paris?"},
                      {"role": "assistant", "tool_calls": [{"type": "function", "function": {
                          "name": "get_weather", "arguments": {"city": "Paris"}}}]},
                      {"role": "tool", "name": "get_weather", "content": "18C"},
                      {"role": "assistant", "content": "It is 18C."}]}


def _stack(tmp_path, files: dict[str, list], mix: list[dict]):
    """A copy of the dev stack whose run `mixed` mixes local files of dataset `local`."""
    for name, rows in files.items():
        path = tmp_path / "local" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return write_stack(tmp_path, [{"name": "local", "path": "local"},
                                  {"name": "hub", "url": "https://example.com/more.jsonl"}],
                       {"name": "mixed", "trainer": "gemma-jax", "pool": "v6e-1x1", "mix": mix,
                        "args": ["--batch_size", "8", "--eval_stories", "4"]})


def _check(capsys, root, *extra):
    return run_check(capsys, root, "mixed", *extra)


MIX = [{"data": "local/chats.jsonl", "weight": 3, "format": "conversational"},
       {"data": "local/shared.jsonl", "weight": 1, "format": "sharegpt"}]


def test_every_dataset_of_a_mix_is_read_with_its_own_format(tmp_path, capsys):
    root = _stack(tmp_path, {"chats.jsonl": [CHAT] * 31, "shared.jsonl": [SHARED] * 8}, MIX)
    code, out, _ = _check(capsys, root, "--examples", "40")
    assert code == 0, out
    assert "run mixed: format conversational, sharegpt, loss completion" in out
    assert "local/chats.jsonl: 31 rows" in out and "local/shared.jsonl: 8 rows" in out
    assert "mix: local/chats.jsonl (weight 3, format conversational): 31 rows" in out
    # The mix ends where the first source runs out: 8 ShareGPT rows are a quarter of it.
    assert "32 rows in the mix (it ends where the first source runs out)" in out
    assert "split: 28 rows to train, 4 held out" in out
    assert "<system> Be brief.\n<user> Hi\n<assistant> [[Hello.]]\n" in out  # ShareGPT's roles, mapped
    report = json.loads(_check(capsys, root, "--json")[1])
    assert [m["rows"] for m in report["mix"]] == [31, 8] and report["mixed_rows"] == 32


def test_a_bad_row_of_any_source_is_listed_and_a_source_staged_elsewhere_named(tmp_path, capsys):
    bad = {"conversations": [{"from": "bot", "value": "Hi"}, {"from": "gpt", "value": "Hello."}]}
    mix = [*MIX, {"data": "hub", "weight": 1, "format": "conversational"}]
    root = _stack(tmp_path, {"chats.jsonl": [CHAT] * 4 + [TOOLS], "shared.jsonl": [SHARED, bad]}, mix)
    code, out, _ = _check(capsys, root)
    assert code == 65, out
    # The JAX trainer renders gemma3-270m's chats with the shipped Gemma 3 template, which prints no tool call.
    assert ("local/chats.jsonl:5: column 'messages' holds tool calls, and chat template gemma3 prints no tool call "
            "(it would train an empty turn); expected a model whose chat template renders tool calls and tools") in out
    assert ("local/shared.jsonl:2: column 'conversations' turn 0 is from 'bot', which is no ShareGPT role; expected "
            "one of the roles system, human, user, gpt, assistant, function_call, observation, tool") in out
    assert "not read: mix[2].data: 'hub' is staged in the cluster, not read here" in out
    assert "rows in the mix" not in out  # unknown while a source is not read


def test_the_plan_refuses_a_bad_first_row_of_any_source_naming_its_key(tmp_path):
    bad = {"conversations": [{"from": "human", "value": "Hi"}]}
    root = _stack(tmp_path, {"chats.jsonl": [CHAT] * 4, "shared.jsonl": [SHARED, bad]}, MIX)
    config = load_files("t", root)
    sources = local_data.local_sources(config, config.runs[0], root)
    assert [(key, data.spec.format) for key, _, data in sources] == [("mix[0].data", "conversational"),
                                                                      ("mix[1].data", "sharegpt")]
    [problem] = map(str, local_data.first_rows_problems(config, root))
    assert problem.startswith("runs[0].mix[1].data: 'local/shared.jsonl' on run 'mixed' (format sharegpt): "
                              "local/shared.jsonl:2: column 'conversations' ends with a user message"), problem


def test_a_tool_call_is_shown_by_name_and_arguments_and_trained_a_tool_result_not():
    spec = formats.Spec.of("conversational")
    parts = check.marked(spec, formats.read_record(spec, TOOLS, 1))
    assert [(text, trained) for text, trained in parts if text.strip() and not text.startswith("<")] == [
        ("Weather in Paris?", False), ('get_weather({"city": "Paris"})', True), ("18C", False), ("It is 18C.", True)]


def test_a_mix_of_data_staged_in_the_cluster_only_is_named_and_not_read(tmp_path, capsys):
    mix = [{"data": "hub", "weight": 1, "format": "conversational"}, {"data": "hub/b.jsonl", "weight": 1}]
    code, out, err = _check(capsys, _stack(tmp_path, {"chats.jsonl": [CHAT]}, mix))
    assert code == 69 and "reads URL https://example.com/more.jsonl; URL https://example.com/more.jsonl, staged in " \
                          "the cluster" in out + err, out + err


def test_a_mixed_jax_run_is_counted_with_its_family_s_chat_template(tmp_path):
    """The JAX trainer renders a mix's chats with its model family's template (cli.chat_template reads the
    sources' formats, --data_format staying at its default): check-data's split says the same template."""
    from admission.check import stack_manifests
    from tools.data.check import _container_args
    from tools.data.split import run_split

    root = _stack(tmp_path, {"chats.jsonl": [CHAT], "shared.jsonl": [SHARED]}, MIX)
    config = load_files("t", root)
    [run] = config.runs
    split = run_split(run, _container_args(stack_manifests(config)[run.name]), 1)
    assert split.template == "gemma3"
