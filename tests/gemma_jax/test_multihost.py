"""Two processes with jax.distributed on CPU equal one process with the same
global batch (same data shards, same 4-device mesh)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time

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

from trainers import exit_codes

pytestmark = pytest.mark.slow
# Enough steps for an eval and a save half-way and at the end, each on both processes.
STEPS = 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_two(tmp_path, stories_file, tokenizer_file, **flags):
    port = _free_port()
    procs = []
    for pid in range(2):
        args = base_args(
            stories_file,
            tokenizer_file,
            tmp_path / "ckpt",
            tmp_path / "logs",
            distributed="on",
            coordinator_address=f"127.0.0.1:{port}",
            num_processes=2,
            process_id=pid,
            **flags,
        )
        procs.append(
            subprocess.Popen(
                train_cmd(args),
                cwd=REPO,
                env=cpu_env(2),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    return procs


def _flatten(rows):
    return {i for row in rows for i in row}


def test_two_processes_equal_one(tmp_path, stories_file, tokenizer_file):
    common = {"steps": STEPS, "log_samples": True, "eval_every": STEPS // 2, "save_every": STEPS // 2}
    multi = tmp_path / "multi"
    procs = _start_two(multi, stories_file, tokenizer_file, sample_tokens=4, **common)
    outs = [p.communicate(timeout=600)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out
    assert "2 processes, 4 cpu devices" in outs[0]
    assert "[sample after]" in outs[0]

    single = tmp_path / "single"
    res = run_train(
        base_args(
            stories_file, tokenizer_file, single / "ckpt", single / "logs", data_shards=2, **common
        ),
        devices=4,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1 processes, 4 cpu devices" in res.stdout

    # Each process read its own shard; together they are the single run's batch.
    p0 = read_samples(str(multi / "logs" / "samples-p0.jsonl"))
    p1 = read_samples(str(multi / "logs" / "samples-p1.jsonl"))
    ref = read_samples(str(single / "logs" / "samples-p0.jsonl"))
    assert sorted(ref) == sorted(p0) == sorted(p1) == list(range(1, STEPS + 1))
    for step in ref:
        assert not _flatten(p0[step]) & _flatten(p1[step])
        assert p0[step] + p1[step] == ref[step]

    diff = max_abs_diff(
        load_params(str(multi / "ckpt"), STEPS), load_params(str(single / "ckpt"), STEPS)
    )
    print(f"max |params(2 processes) - params(1 process)| = {diff:.3g}")
    assert diff <= 1e-6


def test_sigterm_on_two_processes_saves_one_common_step(tmp_path, stories_file, tokenizer_file):
    """JAX's preemption service makes both processes stop at the same step."""
    procs = _start_two(tmp_path, stories_file, tokenizer_file, steps=200, save_every=1000)
    for line in procs[0].stdout:
        m = re.match(r"\[train\] step (\d+) ", line)
        if m and int(m.group(1)) >= 8:
            procs[0].send_signal(signal.SIGTERM)
            time.sleep(0.05)
            procs[1].send_signal(signal.SIGTERM)
            break
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [exit_codes.TERMINATED] * 2, outs
    step = re.search(r"checkpoint of step (\d+) written", outs[0]).group(1)
    assert checkpoint_entries(tmp_path / "ckpt") == [step]
    record = read_progress(tmp_path / "ckpt")  # process 0's record alone
    assert (record["step"], record["checkpoint_step"]) == (int(step), int(step))
    data_files = os.listdir(tmp_path / "ckpt" / step / "data")
    assert {"process_0-of-2.json", "process_1-of-2.json"} <= set(data_files)
