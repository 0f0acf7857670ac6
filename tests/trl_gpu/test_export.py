"""A run's `export:` and `eval:` through the trainer's entry point on CPU (a tiny Gemma 4), and the
exported directory loaded by `make generate`'s own code (tools/model/generate.py)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer

from tools.model import generate as gen
from trainers import eval_report, exit_codes, export_dir
from trainers.trl_gpu import launch

from .conftest import FAST, run, sft_command, tail

pytestmark = pytest.mark.slow

# The export merges in float32 (W + scale * B @ A summed once) where PEFT adds B @ A x to W x: the
# same sums in another order, equal to float32 rounding on logits of this size.
LOGITS_TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def exported(gemma4_dir, sql_file, tmp_path_factory):
    base = tmp_path_factory.mktemp("export-run")
    out, export = base / "run", base / "exports"
    args = [*FAST, "--model_id", gemma4_dir, "--dataset_name", sql_file, "--output_dir", out,
            "--logging_dir", base / "tb", "--max_steps", "4", "--save_steps", "4", "--eval_steps", "4",
            "--max_samples", "40", "--export_dir", export, "--export_dtype", "float32",
            "--eval_samples", "2", "--eval_max_new_tokens", "8", "--eval_prompts", json.dumps(["List every order."])]
    proc = run(sft_command(*args))
    assert proc.returncode == exit_codes.OK, tail(proc)
    return {"out": out, "export": export, "base": gemma4_dir}


def test_the_export_is_complete_and_its_logits_are_the_trained_model_s(exported):
    export = exported["export"]
    marker = export_dir.read(str(export))  # every listed file there at its size
    assert (marker["trainer"], marker["merge"], marker["dtype"], marker["step"]) == ("trl-gpu", True, "float32", 4)
    assert {"model.safetensors", "config.json", "tokenizer_config.json", "chat_template.jinja",
            eval_report.FILE} <= set(marker["files"])
    tokenizer = AutoTokenizer.from_pretrained(export)
    assert tokenizer.chat_template  # the template the run trained with, shipped with the model
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "How many orders?"}], add_generation_prompt=True,
                                        return_tensors="pt", return_dict=True)["input_ids"]
    with torch.no_grad():
        trained = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(exported["base"]), exported["out"]).eval()
        loaded = AutoModelForCausalLM.from_pretrained(export).eval()
        torch.testing.assert_close(loaded(input_ids=ids).logits, trained(input_ids=ids).logits,
                                   rtol=LOGITS_TOLERANCE, atol=LOGITS_TOLERANCE)


def test_eval_json_compares_the_model_with_its_base_on_the_same_prompts(exported):
    body = json.loads((exported["export"] / eval_report.FILE).read_text())
    assert body["schema"] == 1 and body["step"] == 4
    assert body["held_out_loss"]["model"] > 0 and body["held_out_loss"]["base"] > 0
    assert body["held_out_loss"]["model"] != body["held_out_loss"]["base"]  # the adapter changed something
    assert len(body["samples"]) == 3 and body["samples"][-1]["prompt"] == "List every order."
    assert all(isinstance(s["model"], str) and isinstance(s["base"], str) for s in body["samples"])
    # The text-to-SQL rows carry their schema: SQL execution accuracy, scored on the held-out ones.
    assert body["metric"]["name"] == eval_report.SQL_EXECUTION and body["metric"]["scored"] == 2
    assert 0.0 <= body["metric"]["model"] <= 1.0 and 0.0 <= body["metric"]["base"] <= 1.0
    assert "held-out loss" in eval_report.summary(body)


def test_generate_streams_text_from_the_export_and_refuses_an_incomplete_one(exported, tmp_path):
    model, tokenizer, marker = gen.load(str(exported["export"]), "cpu")
    out = io.StringIO()
    text = gen.stream(model, tokenizer, "How many orders?", 6, out=out)
    assert text and out.getvalue() == text + "\n"
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "config.json").write_text("{}")
    with pytest.raises(gen.NotLoadable, match="export_complete.json"):
        gen.load(str(partial), "cpu")


def test_the_adapter_alone_is_exported_with_merge_false(gemma4_dir, exported, tmp_path):
    """The same final adapter, exported alone (the run's `export: {merge: false}`): PEFT loads it onto its base."""
    from trainers.trl_gpu import export as export_lib
    from trainers.trl_gpu.args import parse_args

    script, training = parse_args(["--model_id", str(gemma4_dir), "--output_dir", str(exported["out"]),
                                   "--export_dir", str(tmp_path / "adapter"), "--export_merge", "false",
                                   "--use_cpu", "true"])
    marker = export_lib.export(script, training, 4, None)
    assert marker["merge"] is False and {"adapter_model.safetensors", "adapter_config.json"} <= set(marker["files"])
    assert "model.safetensors" not in marker["files"]


def test_a_failed_export_exits_with_its_own_code_and_the_launcher_keeps_it(gemma4_dir, exported, tmp_path):
    from trainers.trl_gpu import export as export_lib
    from trainers.trl_gpu.args import parse_args

    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    script, training = parse_args(["--model_id", str(gemma4_dir), "--output_dir", str(exported["out"]),
                                   "--export_dir", str(blocker / "export"), "--use_cpu", "true"])
    checkpoints = sorted(p.name for p in exported["out"].iterdir())
    with pytest.raises(export_lib.ExportFailed, match="--export_dir="):
        export_lib.export(script, training, 4, None)
    assert sorted(p.name for p in exported["out"].iterdir()) == checkpoints  # the checkpoints untouched
    assert launch.pick_exit_code(1, [exit_codes.EXPORT_FAILED, 0], False) == exit_codes.EXPORT_FAILED


@pytest.fixture(scope="module")
def served(exported):
    """The export behind transformers' own OpenAI-compatible server (`transformers serve`) on the CPU, as vLLM
    serves it on the cluster (manifests/serving.py): the exported directory, nothing else."""
    import subprocess
    import sys
    import time
    import urllib.request

    from .conftest import _free_port, trainer_env

    port = _free_port()
    command = [str(Path(sys.executable).parent / "transformers"), "serve", str(exported["export"]),
               "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"]
    server = subprocess.Popen(command, env=trainer_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, server.stdout.read()[-4000:]
            try:
                urllib.request.urlopen(f"{url}/models", timeout=2).read()
                break
            except OSError:
                assert time.monotonic() < deadline, "transformers serve did not answer in 120 s"
                time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_make_chat_s_client_talks_to_an_openai_compatible_server_of_the_export(served):
    """What `make chat` sends (tools/model/chat.py: the OpenAI client's streamed chat completions, to the
    model the server lists) is answered by a real OpenAI-compatible server of the trainer's export."""
    from tools.model import chat

    api = chat.client(served)
    model = chat.served_model(api, "sql")  # transformers lists the directory; vLLM lists the run's name
    out = io.StringIO()
    messages = chat.conversation(api, model, ["List every order.", "And the customers?"], "You write SQL.", 8, out)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant"]
    assert all(m["content"] for m in messages)  # each answer streamed in, and kept for the next turn
    assert out.getvalue() == "".join(f"{m['content']}\n" for m in messages if m["role"] == "assistant")


def test_make_chat_answers_a_prompt_and_says_an_unreachable_server_in_one_line(served):
    import subprocess
    import sys

    from .conftest import _free_port, trainer_env

    answered = subprocess.run([sys.executable, "-m", "tools.model", "chat", "--url", served, "--prompt", "List every order.",
                               "--max-tokens", "8"], env=trainer_env(), capture_output=True, text=True, timeout=120)
    # An answer streamed, then the line's end (the tiny model's words may be whitespace).
    assert answered.returncode == 0 and len(answered.stdout) > 1 and answered.stdout.endswith("\n"), answered.stderr
    assert f"[{served}: model " in answered.stderr
    closed = f"http://127.0.0.1:{_free_port()}/v1"
    refused = subprocess.run([sys.executable, "-m", "tools.model", "chat", "--url", closed, "--prompt", "hi"],
                             env=trainer_env(), capture_output=True, text=True, timeout=120)
    assert refused.returncode == 69 and "Traceback" not in refused.stderr
    assert refused.stderr.startswith(f"model: {closed}: APIConnectionError")
