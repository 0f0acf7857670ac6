"""Checkpoint/resume: SIGKILL, SIGTERM and a truncated latest checkpoint.

All runs use float32 params and the same flags, so a resumed run must end
with the same parameters as the uninterrupted one and must have consumed the
same stories at every step.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess

import pytest

from gemma_jax_helpers import (
    REPO,
    base_args,
    checkpoint_entries,
    cpu_env,
    load_params,
    max_abs_diff,
    read_progress,
    read_samples,
    run_train,
    train_cmd,
)
from tools.status.sources import LocalProgress
from trainers import exit_codes

pytestmark = pytest.mark.slow
STEPS = 24


@pytest.fixture(scope="module")
def reference(tmp_path_factory, stories_file, tokenizer_file):
    """The uninterrupted run: final params and consumed stories per step."""
    d = tmp_path_factory.mktemp("reference")
    args = base_args(
        stories_file, tokenizer_file, d / "ckpt", d / "logs", steps=STEPS, log_samples=True
    )
    res = run_train(args)
    assert res.returncode == 0, res.stdout + res.stderr
    samples = read_samples(str(d / "logs" / "samples-p0.jsonl"))
    assert sorted(samples) == list(range(1, STEPS + 1))
    _assert_progress_of_a_whole_run(read_progress(d / "ckpt"))
    # Read back as `make status` reads the bucket (checkpoints/<stack>/<run>/progress.json), validated.
    bucket = tmp_path_factory.mktemp("bucket")
    (bucket / "checkpoints" / "dev" / "reference").mkdir(parents=True)
    shutil.copy(d / "ckpt" / "progress.json", bucket / "checkpoints" / "dev" / "reference" / "progress.json")
    read_back, problem = LocalProgress(str(bucket), "dev").read("reference")
    assert problem == "" and read_back == read_progress(d / "ckpt")
    return {"dir": d, "params": load_params(str(d / "ckpt"), STEPS), "samples": samples}


def _assert_progress_of_a_whole_run(record):
    """One uninterrupted run: the record process 0 wrote beside the checkpoints."""
    assert record["schema"] == 1 and record["trainer"] == "gemma-jax"
    assert (record["step"], record["total_steps"], record["checkpoint_step"]) == (STEPS, STEPS, STEPS)
    assert (record["starts"], record["redone_steps"]) == (1, 0)
    assert record["eval_step"] == STEPS and record["eval_loss"] > 0  # evaluated at the end
    assert record["loss"] > 0 and record["tokens_per_s"] > 0
    assert record["train_seconds"] > 0 and record["restore_seconds"] > 0
    assert record["started_at"] == record["attempt_started_at"] <= record["updated_at"]
    assert record["updated_at"].endswith("+00:00")  # UTC


def _start(args):
    return subprocess.Popen(
        train_cmd(args),
        cwd=REPO,
        env=cpu_env(1),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finalized_steps(ckpt_dir) -> list[int]:
    """Steps Orbax has finalized: it writes into a temporary directory and
    renames it to the bare step number only once every item is complete."""
    if not os.path.isdir(ckpt_dir):
        return []
    return sorted(int(n) for n in checkpoint_entries(ckpt_dir) if n.isdigit())


def _signal_at_step(proc, sig, step: int, ready=lambda: True) -> tuple[str, int]:
    """Sends `sig` at the first reported step >= `step` at which `ready()` holds.

    Returns everything printed and the step reported when the signal went out.
    """
    lines, sent_at = [], None
    for line in proc.stdout:
        lines.append(line)
        m = re.match(r"\[train\] step (\d+) ", line)
        if m and int(m.group(1)) >= step and ready():
            sent_at = int(m.group(1))
            proc.send_signal(sig)
            break
    lines.extend(proc.stdout)
    proc.wait(timeout=300)
    return "".join(lines), sent_at


def _assert_same_as_reference(reference, ckpt, samples):
    diff = max_abs_diff(load_params(str(ckpt), STEPS), reference["params"])
    assert diff <= 1e-6, diff
    assert samples == reference["samples"]


def test_sigkill_at_random_step_then_resume(tmp_path, reference, stories_file, tokenizer_file):
    kill_step = random.Random().randint(6, STEPS - 4)
    print(f"SIGKILL after step {kill_step}")
    ckpt = tmp_path / "ckpt"
    args = base_args(
        stories_file, tokenizer_file, ckpt, tmp_path / "logs", steps=STEPS, log_samples=True
    )
    # Saves are asynchronous: on a loaded machine the step-4 save may still be
    # in flight at the kill step, and a run killed before any save finished
    # rightly starts over. Kill only once a checkpoint is on disk, so the
    # restart must resume.
    out, killed_at = _signal_at_step(
        _start(args), signal.SIGKILL, kill_step, ready=lambda: bool(_finalized_steps(ckpt))
    )
    assert killed_at is not None and "[train] done" not in out
    before = read_progress(ckpt)  # the record of the killed attempt: its last logged step
    # The step line is printed just before the record is written: the kill may fall in between.
    assert before["starts"] == 1 and killed_at - 1 <= before["step"] <= killed_at + 1
    res = run_train(args)
    assert res.returncode == 0, res.stdout + res.stderr
    resumed = int(re.search(r"resumed from step (\d+)", res.stdout).group(1))
    assert 4 <= resumed <= killed_at + 1
    after = read_progress(ckpt)
    # The steps trained after the checkpoint it resumed from are trained again, and counted as lost.
    assert (after["starts"], after["redone_steps"], after["step"]) == (2, before["step"] - resumed, STEPS)
    samples = read_samples(str(tmp_path / "logs" / "samples-p0.jsonl"))
    _assert_same_as_reference(reference, tmp_path / "ckpt", samples)


def test_sigterm_checkpoints_and_loses_no_step(tmp_path, reference, stories_file, tokenizer_file):
    # save_every is larger than the run: only SIGTERM and the end can save.
    args = base_args(
        stories_file,
        tokenizer_file,
        tmp_path / "ckpt",
        tmp_path / "logs",
        steps=STEPS,
        log_samples=True,
        save_every=1000,
    )
    proc = _start(args)
    out, _ = _signal_at_step(proc, signal.SIGTERM, 9)
    assert proc.returncode == exit_codes.TERMINATED, out
    stopped = int(re.search(r"checkpoint of step (\d+) written", out).group(1))
    first = read_samples(str(tmp_path / "logs" / "samples-p0.jsonl"))
    assert max(first) == stopped  # the last trained step is in the checkpoint
    assert checkpoint_entries(tmp_path / "ckpt") == [str(stopped)]
    first_record = read_progress(tmp_path / "ckpt")
    assert (first_record["step"], first_record["checkpoint_step"], first_record["starts"]) == (stopped, stopped, 1)

    res = run_train(args)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"resumed from step {stopped}" in res.stdout
    samples = read_samples(str(tmp_path / "logs" / "samples-p0.jsonl"))
    _assert_same_as_reference(reference, tmp_path / "ckpt", samples)
    record = read_progress(tmp_path / "ckpt")
    assert (record["step"], record["checkpoint_step"], record["starts"], record["redone_steps"]) == (STEPS, STEPS, 2, 0)
    assert record["started_at"] == first_record["started_at"]  # the run's first start, kept
    assert record["attempt_started_at"] >= first_record["updated_at"]
    assert record["restore_seconds"] > first_record["restore_seconds"] > 0  # both starts counted
    assert record["train_seconds"] > first_record["train_seconds"] > 0


def _truncate_largest_file(directory) -> str:
    files = [os.path.join(r, f) for r, _, fs in os.walk(directory) for f in fs]
    victim = max(files, key=os.path.getsize)
    size = os.path.getsize(victim)
    with open(victim, "r+b") as f:
        f.truncate(size // 2)
    return victim


def test_truncated_latest_checkpoint_falls_back(tmp_path, reference, stories_file, tokenizer_file):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(reference["dir"] / "ckpt", ckpt)
    assert sorted(int(s) for s in checkpoint_entries(ckpt)) == [16, 20, 24]
    _truncate_largest_file(ckpt / "24" / "state")
    args = base_args(
        stories_file, tokenizer_file, ckpt, tmp_path / "logs", steps=STEPS, log_samples=True
    )
    res = run_train(args)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "restoring step 24 failed" in res.stdout
    assert "resumed from step 20" in res.stdout
    assert any(n.startswith("corrupt-24-") for n in checkpoint_entries(ckpt))
    samples = read_samples(str(tmp_path / "logs" / "samples-p0.jsonl"))
    assert sorted(samples) == [21, 22, 23, 24]
    assert all(samples[s] == reference["samples"][s] for s in samples)
    diff = max_abs_diff(load_params(str(ckpt), STEPS), reference["params"])
    assert diff <= 1e-6, diff


def test_no_restorable_step_fails_instead_of_starting_over(
    tmp_path, reference, stories_file, tokenizer_file
):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(reference["dir"] / "ckpt", ckpt)
    for step in checkpoint_entries(ckpt):
        _truncate_largest_file(ckpt / step / "state")
    args = base_args(stories_file, tokenizer_file, ckpt, tmp_path / "logs", steps=STEPS)
    for attempt in range(2):  # the restarted pod must not start over either
        res = run_train(args)
        assert res.returncode == exit_codes.CONFIG_ERROR, res.stdout + res.stderr
        assert "starting from step 0" not in res.stdout, attempt
        assert "--checkpoint_dir" in res.stderr
    assert sorted(n.split("-")[1] for n in checkpoint_entries(ckpt)) == ["16", "20", "24"]


def test_missing_data_position_is_a_configuration_error(
    tmp_path, reference, stories_file, tokenizer_file
):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(reference["dir"] / "ckpt", ckpt)
    for name in os.listdir(ckpt / "24" / "data"):
        os.remove(ckpt / "24" / "data" / name)
    res = run_train(base_args(stories_file, tokenizer_file, ckpt, tmp_path / "logs", steps=STEPS))
    assert res.returncode == exit_codes.CONFIG_ERROR, res.stdout + res.stderr
    assert "no data position for this process" in res.stderr
    assert sorted(checkpoint_entries(ckpt)) == ["16", "20", "24"]
