"""Configuration errors end with exit code 78 and a message naming the
problem; the launcher and the checkpoint lookup keep their contracts."""

from __future__ import annotations

import json
import sys

import httpx2 as httpx  # huggingface_hub's HTTP client at the pinned version
import pytest
from huggingface_hub.errors import HfHubHTTPError

from trainers import exit_codes
from trainers.trl_gpu import checkpoints, model
from trainers.trl_gpu.args import ConfigError
from trainers.trl_gpu.launch import pick_exit_code
from trainers.trl_gpu.sft import main

from .conftest import FAST, run, sft_command, tail


def _main(capsys, *argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


@pytest.mark.slow
def test_entry_point_process_exits_78(gemma4_dir, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps({"question": f"q{i}", "answer": "SELECT 1;"}) + "\n" for i in range(3)))
    # A mapping to a column the file lacks: the column, the row and what was expected, before any training.
    proc = run(sft_command("--model_id", gemma4_dir, "--dataset_name", bad, "--output_dir", tmp_path / "o",
                           "--data_format", "prompt-completion", "--columns", "prompt=question,completion=reply"))
    assert proc.returncode == exit_codes.CONFIG_ERROR, tail(proc)
    assert "row 1: column 'reply' is missing (the row has ['answer', 'question']); expected a string" in proc.stderr
    assert not (tmp_path / "o" / "run_info.json").exists()  # refused before the model was set up
    proc = run(sft_command("--learning_rat", "1e-4"))
    assert proc.returncode == exit_codes.CONFIG_ERROR and "--learning_rat" in proc.stderr


def test_unknown_local_model_dir(capsys, sql_file, tmp_path):
    code, err = _main(capsys, "--model_id", tmp_path / "no-model", "--dataset_name", sql_file, "--output_dir", tmp_path)
    assert code == exit_codes.CONFIG_ERROR and "--model_id" in err and "no-model" in err


def test_unknown_hub_model_id_offline(capsys, sql_file, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    code, err = _main(capsys, "--model_id", "google/gemma-4-does-not-exist", "--dataset_name", sql_file,
                      "--output_dir", tmp_path)  # fmt: skip
    assert code == exit_codes.CONFIG_ERROR and "google/gemma-4-does-not-exist" in err


def test_hub_model_without_token(capsys, sql_file, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN_PATH", str(tmp_path / "missing-secret"))
    code, err = _main(capsys, "--model_id", "google/gemma-4-31b-it", "--dataset_name", sql_file, "--output_dir", tmp_path)
    assert code == exit_codes.CONFIG_ERROR
    assert "no Hugging Face token" in err and "HF_TOKEN_PATH" in err and "missing-secret" in err


def test_push_to_hub_without_token(capsys, gemma4_dir, sql_file, tmp_path):
    code, err = _main(capsys, *FAST, "--model_id", gemma4_dir, "--dataset_name", sql_file, "--output_dir", tmp_path,
                      "--push_to_hub", "true", "--max_steps", 1)  # fmt: skip
    assert code == exit_codes.CONFIG_ERROR and "--push_to_hub" in err


def test_token_is_read_from_the_mounted_secret_file(tmp_path, gemma4_dir):
    # huggingface_hub reads HF_TOKEN_PATH when it is imported, as in a pod.
    secret = tmp_path / "hf_api_token"
    secret.write_text("hf_from_the_mounted_secret\n")
    code = (
        "import sys; from huggingface_hub import get_token; from trainers.trl_gpu.model import check_hub_token;"
        f"check_hub_token({str(gemma4_dir)!r}, push_to_hub=True); print(get_token())"
    )
    proc = run([sys.executable, "-c", code], HF_TOKEN_PATH=str(secret))
    assert proc.returncode == 0, tail(proc)
    assert proc.stdout.strip() == "hf_from_the_mounted_secret"


def _http_error(status: int) -> HfHubHTTPError:
    request = httpx.Request("GET", "https://huggingface.co/api/whoami-v2")
    return HfHubHTTPError("whoami failed", response=httpx.Response(status, request=request))


def test_rejected_token_is_a_config_error_but_a_server_error_is_not(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_revoked")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(model, "whoami", lambda token: (_ for _ in ()).throw(_http_error(401)))
    with pytest.raises(ConfigError, match="rejected"):
        model.check_hub_token("google/gemma-4-31b-it", push_to_hub=False)
    monkeypatch.setattr(model, "whoami", lambda token: (_ for _ in ()).throw(_http_error(503)))
    with pytest.raises(HfHubHTTPError):
        model.check_hub_token("google/gemma-4-31b-it", push_to_hub=False)


def test_network_trouble_is_retryable_only_online(monkeypatch):
    try:
        try:
            raise httpx.ConnectError("unreachable")
        except httpx.ConnectError as cause:
            raise OSError("We couldn't connect to the Hub") from cause
    except OSError as err:
        wrapped = err
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert model.network_trouble(wrapped)
    assert not model.network_trouble(OSError("does not appear to have a file named config.json"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert not model.network_trouble(wrapped)


@pytest.mark.parametrize(
    "launcher, workers, terminated, expected",
    [
        (0, [0, 0], False, exit_codes.OK),
        (1, [78, 78], False, exit_codes.CONFIG_ERROR),
        (1, [143, 143], True, exit_codes.TERMINATED),
        (1, [143, 78], True, exit_codes.CONFIG_ERROR),
        (1, [], True, exit_codes.TERMINATED),  # killed before any worker reported: never 0
        (1, [1, 0], False, 1),
        (-9, [], False, -9),
    ],
)
def test_launcher_exit_code(launcher, workers, terminated, expected):
    assert pick_exit_code(launcher, workers, terminated) == expected


def _checkpoint(root, step, complete=True):
    path = root / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "trainer_state.json").write_text("{}")
    if complete:
        (path / checkpoints.COMPLETE_MARKER).write_text(json.dumps({"global_step": step}))
    return path


def test_latest_complete_checkpoint_skips_cut_short_saves(tmp_path):
    assert checkpoints.latest_complete_checkpoint(str(tmp_path / "absent")) is None
    _checkpoint(tmp_path, 10)
    good = _checkpoint(tmp_path, 20)
    partial = _checkpoint(tmp_path, 30, complete=False)
    garbled = _checkpoint(tmp_path, 40, complete=False)
    (garbled / checkpoints.COMPLETE_MARKER).write_text("{trunc")
    (tmp_path / "checkpoint-x").mkdir()
    assert checkpoints.latest_complete_checkpoint(str(tmp_path)) == str(good)
    removed = checkpoints.remove_incomplete_checkpoints(str(tmp_path))
    assert sorted(removed) == sorted([str(partial), str(garbled)])
    assert good.exists() and not partial.exists() and not garbled.exists()
