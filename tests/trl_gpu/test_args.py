"""Flags: the recipe's defaults, TRL-style YAML + CLI parsing, warmup, errors."""

from __future__ import annotations

import pytest

from trainers.trl_gpu.args import ConfigError, parse_args


def test_defaults_are_the_recipe_defaults(tmp_path):
    script, training = parse_args([])
    assert script.model_id == "google/gemma-4-31b-it"
    assert script.dataset_name == "philschmid/gretel-synthetic-text-to-sql"
    assert (script.lora_r, script.lora_alpha, script.lora_dropout) == (16, 32, 0.05)
    assert (script.max_samples, script.eval_fraction) == (12_500, 0.2)  # 2,500 rows held out
    assert training.output_dir == "gemma-31b-text-to-sql"
    # The data settings of any run: plain text, loss on the completion where there is one.
    assert (script.data_format, script.columns, script.loss_on) == ("text", "", "completion")
    assert training.max_length == 1024
    assert training.num_train_epochs == 3
    # The recipe's global batch of 8 x 2 x 32 = 512 rows, in 4x larger micro-batches.
    assert training.per_device_train_batch_size * training.gradient_accumulation_steps == 2 * 32
    assert training.per_device_train_batch_size == 8
    assert training.learning_rate == 1e-5
    assert training.logging_steps == 10
    assert training.save_strategy == "steps" and training.eval_strategy == "steps"
    assert training.push_to_hub is False and training.hub_private_repo is True
    assert training.max_grad_norm == 0.3
    assert training.seed == 42
    assert training.report_to == ["tensorboard"]
    assert training.eval_strategy == "steps"


def test_checkpoints_and_evaluations_are_spread_over_the_run():
    from transformers import TrainerState

    _, training = parse_args([])
    # The A4 run: 10,000 training rows / 512 per step = 20 steps per epoch, 3 epochs.
    state = TrainerState()
    state.compute_steps(training, 60)  # how the Trainer turns fractions into steps
    assert (state.save_steps, state.eval_steps) == (3, 15)
    state.compute_steps(training, 2000)
    assert (state.save_steps, state.eval_steps) == (100, 500)
    _, training = parse_args(["--save_steps", "20"])
    state.compute_steps(training, 60)
    assert state.save_steps == 20  # a whole number is still a number of steps


@pytest.mark.parametrize(
    "variable, key",
    [("FSDP_ACTIVATION_CHECKPOINTING", "fsdp_activation_checkpointing"),
     ("FSDP_CPU_RAM_EFFICIENT_LOADING", "fsdp_cpu_ram_efficient_loading")],
)  # fmt: skip
def test_accelerate_settings_that_break_the_adapter_or_the_load_are_refused(monkeypatch, variable, key):
    # What `accelerate launch` exports from an FSDP v2 config with the setting on.
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    monkeypatch.setenv("FSDP_VERSION", "2")
    monkeypatch.setenv(variable, "true")
    with pytest.raises(ConfigError, match=f"{key} \\(accelerate config\\)=True is invalid: set it to false"):
        parse_args([])
    monkeypatch.setenv(variable, "false")
    _, training = parse_args([])
    assert training.activation_checkpointing is True


def test_activation_checkpointing_is_non_reentrant_and_keeps_the_rng_state():
    _, training = parse_args([])
    assert training.activation_checkpointing and training.gradient_checkpointing
    # preserve_rng_state is left at torch.utils.checkpoint's default, True.
    assert training.activation_checkpointing_kwargs == {"use_reentrant": False}
    assert training.gradient_checkpointing_kwargs == {"use_reentrant": False}


def test_the_shipped_accelerate_config_is_fsdp2_with_sharded_checkpoints():
    import yaml

    from .conftest import REPO

    config = yaml.safe_load((REPO / "trainers" / "trl_gpu" / "accelerate_fsdp_8gpu.yaml").read_text())["fsdp_config"]
    assert config["fsdp_version"] == 2
    assert config["fsdp_cpu_ram_efficient_loading"] is False
    assert config["fsdp_activation_checkpointing"] is False
    assert config["fsdp_state_dict_type"] == "SHARDED_STATE_DICT"


def test_packing_is_bfd_only_and_padding_free_comes_with_it():
    _, training = parse_args(["--packing", "true"])
    assert training.packing and training.packing_strategy == "bfd"
    for argv, flag in [
        (["--packing", "true", "--packing_strategy", "wrapped"], "--packing_strategy"),
        (["--padding_free", "true"], "--padding_free"),
    ]:
        with pytest.raises(ConfigError, match=flag):
            parse_args(argv)


def test_liger_kernels_are_a_configuration_error_without_a_gpu():
    import torch

    assert not torch.cuda.is_available()  # the CPU test environment
    with pytest.raises(ConfigError, match="--use_liger_kernel.*CUDA GPU"):
        parse_args(["--use_liger_kernel", "true"])


def test_warmup_is_a_ratio_of_the_optimizer_steps():
    _, training = parse_args(["--max_steps", "1000"])
    # 3% of the steps warm up, and the schedule is one that uses them.
    assert training.get_warmup_steps(1000) == 30
    assert training.lr_scheduler_type == "constant_with_warmup"
    _, training = parse_args(["--warmup_ratio", "0.1"])
    assert training.get_warmup_steps(200) == 20


def test_no_label_names_and_answer_only_loss():
    _, training = parse_args([])
    assert not training.label_names
    assert training.completion_only_loss is True
    assert training.packing is False  # allowed (bfd), off by default


def test_yaml_config_then_command_line_overrides(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("lora_r: 8\nlearning_rate: 0.0002\noutput_dir: /tmp/from-yaml\n")
    script, training = parse_args(["--config", str(config), "--lora_r", "4"])
    assert script.lora_r == 4  # the command line wins
    assert training.learning_rate == 2e-4  # the file overrides the default
    assert training.output_dir == "/tmp/from-yaml"


def test_logging_dir_feeds_tensorboard(tmp_path, monkeypatch):
    monkeypatch.delenv("TENSORBOARD_LOGGING_DIR", raising=False)
    script, _ = parse_args(["--output_dir", str(tmp_path), "--logging_dir", str(tmp_path / "tb")])
    import os

    assert os.environ["TENSORBOARD_LOGGING_DIR"] == str(tmp_path / "tb") == script.logging_dir


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--no_such_flag", "1"], "--no_such_flag"),
        (["--hf_token", "hf_secret"], "--hf_token"),  # the token is never a flag
        (["--warmup_ratio", "3"], "--warmup_ratio"),
        (["--warmup_steps", "0.03"], "--warmup_steps"),
        (["--lora_r", "0"], "--lora_r"),
        (["--eval_fraction", "1.5"], "--eval_fraction"),
        (["--save_total_limit", "1"], "--save_total_limit"),
        (["--label_names", "domain"], "--label_names"),
        (["--chat_template", "no-such-template"], "--chat_template"),
        (["--num_train_epochs", "many"], "--num_train_epochs"),
    ],
)
def test_bad_flags_are_config_errors_naming_the_flag(argv, flag):
    with pytest.raises(ConfigError) as err:
        parse_args(argv)
    assert flag in str(err.value)


def test_hub_repository_is_named_after_the_model_not_the_mount():
    _, training = parse_args(["--push_to_hub", "true", "--output_dir", "/checkpoints/run-1"])
    assert training.hub_model_id == "gemma-4-31b-it-finetuned"
    _, training = parse_args(["--push_to_hub", "true", "--hub_model_id", "me/sql"])
    assert training.hub_model_id == "me/sql"


def test_unreadable_or_invalid_config_file(tmp_path):
    with pytest.raises(ConfigError, match="absent.yaml"):
        parse_args(["--config", str(tmp_path / "absent.yaml")])
    broken = tmp_path / "broken.yaml"
    broken.write_text("lora_r: [16\n")
    with pytest.raises(ConfigError):
        parse_args(["--config", str(broken)])
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("lora_rank: 16\n")
    with pytest.raises(ConfigError, match="lora_rank"):
        parse_args(["--config", str(unknown)])
