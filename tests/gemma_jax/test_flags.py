"""flags.argument_problems agrees with the trainer's real parser, names the
flag in every problem, and imports with the standard library alone."""

from __future__ import annotations

import functools
import os
import random
import subprocess

import pytest

from gemma_jax_helpers import REPO
from trainers.gemma_jax import flags
from trainers.gemma_jax import model as model_lib

GOOD = [
    [],
    ["--maxlen", "512", "--batch_size", "64"],
    ["--maxlen=512", "--fsdp", "--lora_rank", "8"],
    ["--fsdp", "4", "--learning_rate", "1e-4", "--log_samples"],
    ["--fsdp", "-1", "--seed", str(2**40)],
    ["--profile_steps", "10:15", "--xprof_port", "9012", "--peak_flops_per_device", "9.2e14"],
    ["--model", "gemma4-e2b", "--distributed", "on", "--num_processes", "2", "--process_id", "1"],
    ["--sample_prompt", "-- a prompt with spaces", "--tokenizer", ""],
    ["--data_path", "/data/x.txt", "--checkpoint_dir", "/checkpoints", "--log_dir", "/profiles"],
    ["--init_from_hf", "/hf", "--export_hf", "/out", "--inspect_batches", "2", "--inspect_out", "b.npz"],
    ["--maxlen", "256", "--maxlen", "128"],  # the last one wins, as in argparse
]
BAD = [
    (["--max_len", "256"], "--max_len: unknown flag; did you mean --maxlen?"),
    (["--maxlen", "abc"], "--maxlen: 'abc' is not an int"),
    (["stray"], "'stray': a value without a flag"),
    (["--maxlen"], "--maxlen: missing value"),
    (["--maxlen", "--batch_size", "8"], "--maxlen: missing value"),
    (["--param_dtype", "float16"], "--param_dtype: 'float16' is not one of bfloat16, float32"),
    (["--model", "gemma9-1t"], "--model: 'gemma9-1t' is not one of"),
    (["--maxlen", "4"], "--maxlen: 4 is below the minimum 8"),
    (["--learning_rate", "0"], "--learning_rate: 0 must be > 0.0"),
    (["--learning_rate", "-1e-3"], "--learning_rate: missing value"),
    (["--fsdp", "0"], "--fsdp: use -1"),
    (["--profile_steps", "7"], "--profile_steps: expected START:END"),
    (["--seed", "-1"], "--seed: -1 is below the minimum 0"),
    (["--log_samples=yes"], "--log_samples: takes no value"),
    (["--batch_siz", "8"], "--batch_siz: unknown flag; did you mean --batch_size?"),
    (["-x"], "-x: unknown flag"),
    (["--help"], "--help: prints the help"),
]


@functools.lru_cache(maxsize=1)
def _real_parser():
    return flags.build_parser(raise_errors=True)


def _parser_accepts(argv) -> bool:
    try:
        _real_parser().parse_args(argv)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("argv", GOOD)
def test_good_argv_parses_in_both(argv):
    assert flags.argument_problems(argv) == []
    assert _parser_accepts(argv)


@pytest.mark.parametrize("argv,problem", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_argv_is_refused_by_both_with_the_flag_first(argv, problem):
    problems = flags.argument_problems(argv)
    assert problems and problems[0].startswith(problem), problems
    if argv != ["--help"]:  # argparse prints the help and exits 0
        assert not _parser_accepts(argv)


def test_every_problem_is_reported():
    problems = flags.argument_problems(["--maxlen", "x", "--epochs", "0", "oops", "--lr", "1"])
    assert [p.split(":")[0] for p in problems] == ["--maxlen", "--epochs", "'oops'", "--lr"]


def _random_argv(r: random.Random) -> list[str]:
    names = [f"--{n}" for n in flags._FIELDS] + ["--maxln", "--bogus"]  # pylint: disable=protected-access
    values = ["8", "0", "-1", "1e-4", "abc", "3:4", "bfloat16", "tiny", "", "-x", "7 8", "on"]
    argv = []
    for _ in range(r.randint(0, 5)):
        token = r.choice(names)
        kind = r.random()
        if kind < 0.6:
            argv += [token, r.choice(values)]
        elif kind < 0.8:
            argv.append(f"{token}={r.choice(values)}")
        else:
            argv.append(token if r.random() < 0.8 else r.choice(values))
    return argv


def test_agrees_with_the_real_parser_on_random_argv():
    r = random.Random(7)
    for _ in range(3000):
        argv = _random_argv(r)
        if "--help" in argv:
            continue
        assert (flags.argument_problems(argv) == []) == _parser_accepts(argv), argv


def test_model_choices_are_the_registry():
    assert set(flags.MODEL_NAMES) == set(model_lib.MODELS)


def test_parsed_flags_are_the_declared_defaults():
    assert flags.parse([]) == flags.Flags()
    parsed = flags.parse(["--fsdp", "--profile_steps", "3:5"])
    assert (parsed.fsdp, parsed.profile_steps) == (-1, (3, 5))


def _platform_python() -> str:
    path = os.path.join(REPO, ".venv", "bin", "python")
    assert os.path.exists(path), f"{path}: the platform's Python 3.11 environment (make venv) is missing"
    return path


def test_imports_on_python_311_with_the_standard_library_only():
    code = (
        "import sys\n"
        "assert sys.version_info[:2] == (3, 11), sys.version\n"
        "from trainers.gemma_jax import flags\n"
        "heavy = {'jax', 'numpy', 'gemma', 'grain', 'orbax', 'flax'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
        "print(flags.argument_problems(['--max_len', '5']))\n"
    )
    res = subprocess.run(
        [_platform_python(), "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
        env={"PYTHONPATH": REPO, "PATH": os.environ.get("PATH", "")},
    )
    assert res.returncode == 0, res.stderr
    assert "--max_len: unknown flag; did you mean --maxlen?" in res.stdout


@pytest.mark.parametrize(
    "value,ok",
    [("gs://gemma-data/checkpoints/x", True), ("gs://Bad_Bucket/x", False), ("gs://b", False), ("s3://b/x", False)],
)
def test_remote_paths_are_checked(value, ok):
    from trainers.gemma_jax import cli  # pylint: disable=g-import-not-at-top

    if ok:
        cli.check_path("pretrained", value)
    else:
        with pytest.raises(cli.ConfigError, match="--pretrained="):
            cli.check_path("pretrained", value)
