"""trainers.trl_gpu.flags: the standard-library flag check the platform runs
before declaring a run agrees with the trainer's real parser (TrlParser over
args.py's dataclasses), and its snapshot has not drifted from that parser."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from trainers.trl_gpu import args as trainer_args
from trainers.trl_gpu import flags

from .conftest import REPO, trainer_env
from .test_manifest_flags import COMMANDS, split_launch


def test_the_snapshot_is_the_real_parser_s_flags():
    committed = json.loads(flags.SNAPSHOT.read_text())["flags"]
    assert committed == flags.real_snapshot(), "flags.json is stale: python -m trainers.trl_gpu.flags --write"


def test_the_check_imports_only_the_standard_library():
    code = (
        "import sys; from trainers.trl_gpu import flags;"
        "assert flags.argument_problems(['--lora_r', '4']) == [];"
        "heavy = sorted(m for m in ('torch', 'transformers', 'trl', 'peft', 'yaml', 'datasets') if m in sys.modules);"
        "print(heavy)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=trainer_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def _real_rejects(argv: list[str], monkeypatch) -> str | None:
    """The real parser's verdict: None if argv parses, else its message."""
    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", "")
    try:
        trainer_args.real_parser().parse_args_and_config(args=list(argv))
    except (trainer_args.ConfigError, ValueError, IndexError) as err:  # IndexError: a trailing --config
        return str(err)
    return None


GOOD = [
    [],
    ["--output_dir", "/checkpoints", "--logging_dir", "/profiles", "--dataset_name", "/data/sql.jsonl"],
    ["--push_to_hub"],  # a bool flag alone means true
    ["--push_to_hub", "false", "--merge_adapter", "yes", "--resume", "0"],
    ["--no_resume", "--lora_r", "8"],  # the complement of a true-by-default bool
    ["--num-train-epochs", "2"],  # the dashed spelling
    ["--learning_rate=2e-4", "--max_steps", "-1"],
    ["--report_to", "none"],
    ["--eval_steps", "none", "--lr_scheduler_type", "cosine"],
    ["--chat_template", "gemma3", "--packing", "true", "--debug", "underflow_overflow"],
]
BAD = [
    (["--max_len", "512"], "--max_len: unknown flag; did you mean --max_length?"),
    (["--num_train_epochs", "abc"], "--num_train_epochs: 'abc' is not a float"),
    (["--lora_r", "1.5"], "--lora_r: '1.5' is not an int"),
    (["--push_to_hub", "maybe"], "--push_to_hub: 'maybe' is not a boolean"),
    (["stray"], "'stray': a value without a flag"),
    (["--lora_r", "4", "extra"], "'extra': a value without a flag"),
    (["--report_to", "none", "tensorboard"], "'tensorboard': a value without a flag"),  # one value only
    (["--max_length"], "--max_length: missing value"),
    (["--save_strategy", "hourly"], "--save_strategy: 'hourly' is not allowed"),
    (["--learning_rat", "1e-4"], "--learning_rat: unknown flag; did you mean --learning_rate?"),
    (["--hf_token", "hf_x"], "--hf_token: unknown flag"),
    (["--max_steps", "none"], "--max_steps: 'none' is not an int"),
]


@pytest.mark.parametrize("argv", GOOD, ids=[" ".join(a) or "empty" for a in GOOD])
def test_what_the_real_parser_accepts_has_no_problem(argv, monkeypatch):
    assert _real_rejects(argv, monkeypatch) is None
    assert flags.argument_problems(argv) == []


@pytest.mark.parametrize("argv,problem", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_what_the_real_parser_rejects_is_a_problem_naming_the_flag(argv, problem, monkeypatch):
    real = _real_rejects(argv, monkeypatch)
    assert real is not None, f"the real parser accepts {argv}"
    problems = flags.argument_problems(argv)
    assert problems and problems[0].startswith(problem), problems
    flag = problem.split(":")[0]
    assert flag.strip("'") in real  # both name the same flag or value


def test_several_problems_are_all_named():
    problems = flags.argument_problems(["--max_len", "5", "--num_train_epochs", "abc"])
    assert problems == ["--num_train_epochs: 'abc' is not a float", "--max_len: unknown flag; did you mean --max_length?"]


def test_config_file_flag(tmp_path, monkeypatch):
    config = tmp_path / "run.yaml"
    config.write_text("lora_r: 8\n")
    argv = ["--config", str(config), "--lora_r", "4"]
    assert _real_rejects(argv, monkeypatch) is None and flags.argument_problems(argv) == []
    assert flags.argument_problems(["--lora_r", "4", "--config"]) == ["--config: missing value (expected a YAML file)"]
    assert _real_rejects(["--lora_r", "4", "--config"], monkeypatch) is not None


@pytest.mark.parametrize("name,argv,resources", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_every_golden_run_passes_the_check(name, argv, resources):
    assert flags.argument_problems(split_launch(argv).training_script_args) == []
