"""Every rendered trl-gpu run (tests/golden/) starts a command this trainer accepts.

The pod's command and args are split the way they are on the cluster:
`accelerate launch`'s own parser (behind trainers.trl_gpu.launch) takes the
launcher flags and hands the rest to `-m trainers.trl_gpu.sft`, whose flags
go through the trainer's real parser (trainers.trl_gpu.args). A misspelt or
unknown flag in a stack file, or a value the trainer refuses, fails here.
Only parsing: nothing is loaded or trained.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from accelerate.commands.launch import launch_command_parser

from trainers.trl_gpu import args as trainer_args
from trainers.trl_gpu.launch import main as launcher_main  # noqa: F401 (the wrapper the pods run)

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden"
LAUNCHER = ["python", "-m", "trainers.trl_gpu.launch"]
ENTRY = "trainers.trl_gpu.sft"


def _containers(manifest: dict) -> list[dict]:
    return [
        container
        for rjob in manifest["spec"]["replicatedJobs"]
        for container in rjob["template"]["spec"]["template"]["spec"]["containers"]
    ]


def golden_commands() -> list[tuple[str, list[str], dict]]:
    """(stack/run, command + args, pod resources) of every golden container that runs this trainer."""
    found = []
    for path in sorted(GOLDEN.glob("*/*.yaml")):
        for container in _containers(yaml.safe_load(path.read_text())):
            if ENTRY in container.get("command", []):
                found.append((f"{path.parent.name}/{path.stem}", container["command"] + container.get("args", []),
                              container["resources"]))  # fmt: skip
    return found


COMMANDS = golden_commands()


def known_flags(parser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


def exact_flag_problems(argv: list[str], parser) -> list[str]:
    """Flags that are not the parser's own spelling (argparse would take an abbreviation)."""
    known = known_flags(parser)
    return [a for a in argv if a.startswith("--") and a.split("=", 1)[0] not in known]


def split_launch(argv: list[str]):
    """What `accelerate launch` makes of the pod's command: its options, and the trainer's argv."""
    assert argv[:3] == LAUNCHER, argv
    return launch_command_parser().parse_args(argv[3:])


def test_the_goldens_hold_gpu_runs_of_shipped_stacks():
    stacks = {name.split("/")[0] for name, _argv, _res in COMMANDS}
    assert stacks - {"examples"}, f"no shipped stack's golden runs {ENTRY}: {sorted(stacks)}"


@pytest.mark.parametrize("name,argv,resources", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_the_launcher_runs_the_trainer_with_one_process_per_gpu(name, argv, resources):
    launch = split_launch(argv)
    assert launch.module and launch.training_script == ENTRY
    assert int(launch.num_processes) == int(resources["limits"]["nvidia.com/gpu"])
    assert (REPO / launch.config_file).is_file(), launch.config_file
    launcher_argv = argv[3 : len(argv) - len(launch.training_script_args) - 2]
    assert exact_flag_problems(launcher_argv, launch_command_parser()) == []


@pytest.mark.parametrize("name,argv,resources", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_the_trainer_parser_accepts_the_run_s_flags(name, argv, resources, monkeypatch):
    trainer_argv = split_launch(argv).training_script_args
    parser = trainer_args._Parser((trainer_args.ScriptArguments, trainer_args.TrainingArguments))
    assert exact_flag_problems(trainer_argv, parser) == [], f"{name}: flags the trainer does not define"
    # parse_args exports the TensorBoard directory; keep it out of the other tests.
    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", "")
    try:
        script, training = trainer_args.parse_args(trainer_argv)
    except trainer_args.ConfigError as err:
        pytest.fail(f"{name}: the trainer refuses its manifest's flags: {err}")
    assert training.output_dir == "/checkpoints"  # the run's read-write checkpoint mount
    assert script.logging_dir == "/profiles"  # TensorBoard events on the run's profiles mount
    if "--model_id" in trainer_argv:
        assert script.model_id == trainer_argv[trainer_argv.index("--model_id") + 1]


def test_a_misspelt_flag_is_caught(monkeypatch):
    [(_name, argv, _resources), *_] = COMMANDS
    launch = split_launch(argv)
    typo = [("--learning_rat" if a == "--learning_rate" else a) for a in launch.training_script_args]
    assert typo != launch.training_script_args
    parser = trainer_args._Parser((trainer_args.ScriptArguments, trainer_args.TrainingArguments))
    assert exact_flag_problems(typo, parser) == ["--learning_rat"]
    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", "")
    with pytest.raises(trainer_args.ConfigError):
        trainer_args.parse_args([*typo, "--no_such_flag", "1"])
