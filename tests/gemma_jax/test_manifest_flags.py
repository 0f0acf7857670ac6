"""Every rendered gemma-jax run (tests/golden/) passes flags this trainer accepts.

The pod's args (the platform's paths and peak FLOP/s, then the stack's own
flags) go through the trainer's real parser and checks
(trainers.gemma_jax.cli.parse_args), and every flag must be spelt exactly as
the parser defines it (argparse would silently take an abbreviation). A
misspelt or unknown flag in a stack file, or a value the trainer refuses,
fails here. Only parsing: nothing is loaded or trained.
"""

from __future__ import annotations

import pathlib

import pytest
import yaml

from gemma_jax_helpers import REPO  # noqa: F401 (puts the repository on sys.path)
from trainers.gemma_jax import cli

GOLDEN = pathlib.Path(__file__).resolve().parents[1] / "golden"
COMMAND = ["python", "-m", "trainers.gemma_jax.train"]
DATA_MOUNT = "/data/"


def _containers(manifest: dict) -> list[dict]:
    return [
        container
        for rjob in manifest["spec"]["replicatedJobs"]
        for container in rjob["template"]["spec"]["template"]["spec"]["containers"]
    ]


def golden_args() -> list[tuple[str, list[str]]]:
    """(stack/run, args) of every golden container that starts this trainer."""
    found = []
    for path in sorted(GOLDEN.glob("*/*.yaml")):
        for container in _containers(yaml.safe_load(path.read_text())):
            if container.get("command") == COMMAND:
                found.append((f"{path.parent.name}/{path.stem}", container["args"]))
    return found


ARGS = golden_args()


def unknown_flags(argv: list[str]) -> list[str]:
    known = {
        f
        for action in cli.build_parser()._actions  # pylint: disable=protected-access
        for f in action.option_strings
    }
    return [a for a in argv if a.startswith("--") and a.split("=", 1)[0] not in known]


def with_local_data(argv: list[str], data_file: pathlib.Path) -> list[str]:
    """`argv` with the data file (on the run's GCS mount) replaced by a local one.

    The parser checks that the data file exists; everything else is parsed as
    the pod passes it.
    """
    i = argv.index("--data_path")
    assert argv[i + 1].startswith(DATA_MOUNT), argv[i + 1]
    return [*argv[: i + 1], str(data_file), *argv[i + 2 :]]


@pytest.fixture
def data_file(tmp_path) -> pathlib.Path:
    path = tmp_path / "TinyStories-train.txt"
    path.write_text("Once upon a time.\n<|endoftext|>\n")
    return path


def test_the_goldens_hold_tpu_runs_of_shipped_stacks():
    stacks = {name.split("/")[0] for name, _ in ARGS}
    assert stacks - {"examples"}, f"no shipped stack's golden runs gemma-jax: {stacks}"


@pytest.mark.parametrize("name,argv", ARGS, ids=[a[0] for a in ARGS])
def test_the_trainer_parser_accepts_the_run_s_flags(name, argv, data_file):
    assert unknown_flags(argv) == [], f"{name}: flags the trainer does not define"
    try:
        config = cli.parse_args(with_local_data(argv, data_file))
    except cli.ConfigError as err:
        pytest.fail(f"{name}: the trainer refuses its manifest's flags: {err}")
    assert config.checkpoint_dir == "/checkpoints"  # the run's read-write mount
    assert config.log_dir == "/profiles"  # TensorBoard events outlive the pod
    profiled = "--profile_steps" in argv
    assert (config.profile_steps is not None) == profiled
    assert (config.xprof_port > 0) == profiled
    assert config.peak_flops_per_device > 0  # MFU is reported on every run
    for flag in ("--maxlen", "--batch_size", "--datacount"):
        if flag in argv:
            value = int(argv[argv.index(flag) + 1])
            assert getattr(config, flag[2:]) == value, flag


def test_a_misspelt_flag_is_caught(data_file):
    [(_, argv), *_] = ARGS
    typo = ["--batch_siz" if a == "--batch_size" else a for a in argv]
    assert typo != argv
    # argparse alone would read --batch_siz as --batch_size; the spelling check does not.
    assert unknown_flags(typo) == ["--batch_siz"]
    with pytest.raises(cli.ConfigError):
        cli.parse_args(with_local_data([*argv, "--batchsize", "64"], data_file))
