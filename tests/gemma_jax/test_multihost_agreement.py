"""Two processes with jax.distributed on CPU: what only one process does or
sees still ends both, promptly and with the same exit code.

- `--export_hf`: process 0 exports alone; both must finish (not wait in an
  Orbax barrier for a process that never comes, then be aborted by
  jax.distributed's 5-minute shutdown barrier).
- a restore problem only process 1 sees (its data position missing): both
  must exit 78 (not 134 after the same 5 minutes).

Each asserts that both processes exit within AFTER_S of the moment the
one-sided part begins (training done, resp. process 1's problem printed),
well under jax's 300 s shutdown timeout; DEADLINE_S bounds the whole run
(start-up and compilation on a loaded 2-core machine included), after which
both are killed and the test fails.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time

import pytest

from gemma_jax_helpers import REPO, base_args, checkpoint_entries, cpu_env, load_params, train_cmd
from trainers import exit_codes
from trainers.gemma_jax import hf as hf_lib

pytestmark = pytest.mark.slow
DEADLINE_S = 600
AFTER_S = 120
STEPS = 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_two(workdir, stories_file, tokenizer_file, ckpt, marker: str, **flags) -> dict:
    """Both processes' exit codes and logs, and how long they ran on after
    `marker` first appeared in either log; both are killed at DEADLINE_S."""
    port, procs, logs = _free_port(), [], []
    for pid in range(2):
        args = base_args(
            stories_file, tokenizer_file, ckpt, workdir / "logs",
            distributed="on", coordinator_address=f"127.0.0.1:{port}",
            num_processes=2, process_id=pid, eval_batches=1, **flags,
        )
        logs.append(workdir / f"process-{pid}.log")
        with open(logs[-1], "w", encoding="utf-8") as out:
            procs.append(subprocess.Popen(train_cmd(args), cwd=REPO, env=cpu_env(2),
                                          stdout=out, stderr=subprocess.STDOUT))
    start = time.monotonic()
    seen = None
    while any(p.poll() is None for p in procs) and time.monotonic() - start < DEADLINE_S:
        if seen is None and any(marker in path.read_text(encoding="utf-8") for path in logs):
            seen = time.monotonic()
        time.sleep(0.5)
    end, timed_out = time.monotonic(), any(p.poll() is None for p in procs)
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
    texts = [path.read_text(encoding="utf-8") for path in logs]
    return {
        "codes": [p.returncode for p in procs],
        "timed_out": timed_out,
        "seconds": end - start,
        "after_marker": None if seen is None else end - seen,
        "logs": texts,
        "all_logs": "\n---\n".join(texts),
    }


@pytest.fixture(scope="module")
def exported(tmp_path_factory, stories_file, tokenizer_file):
    """A 2-process run that trains STEPS steps, checkpoints them and exports."""
    d = tmp_path_factory.mktemp("export_two")
    res = _run_two(d, stories_file, tokenizer_file, d / "ckpt", "[train] done",
                   steps=STEPS, save_every=STEPS, export_hf=str(d / "hf"))
    res["dir"] = d
    return res


def test_export_hf_on_two_processes_ends_both(exported):
    after = exported["after_marker"]
    print(f"2-process run with --export_hf: {exported['seconds']:.0f}s, {after}s after training")
    assert not exported["timed_out"], f"killed after {DEADLINE_S}s:\n" + exported["all_logs"]
    assert after is not None and after <= AFTER_S, exported["all_logs"]
    assert exported["codes"] == [exit_codes.OK] * 2, exported["all_logs"]
    hf = exported["dir"] / "hf"
    assert (hf / "config.json").is_file() and (hf / "model.safetensors").is_file()
    assert f"[export] step {STEPS} of" in exported["logs"][0]
    assert "[export]" not in exported["logs"][1]  # process 0 alone writes it

    # What was exported is the trained step (float32 export of float32 params).
    tensors = hf_lib.read_safetensors(str(hf / "model.safetensors"))
    embedding = load_params(str(exported["dir"] / "ckpt"), STEPS)["embedder"]["input_embedding"]
    assert tensors["model.embed_tokens.weight"].shape == embedding.shape
    assert float(abs(tensors["model.embed_tokens.weight"] - embedding).max()) == 0.0


def test_restore_problem_seen_by_one_process_ends_both_with_78(exported, tmp_path, stories_file,
                                                               tokenizer_file):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(exported["dir"] / "ckpt", ckpt)
    missing = ckpt / str(STEPS) / "data" / "process_1-of-2.json"
    assert missing.is_file()
    os.remove(missing)  # only process 1 reads (and misses) its data position

    res = _run_two(tmp_path, stories_file, tokenizer_file, ckpt, "no data position for this process",
                   steps=2 * STEPS, save_every=STEPS)
    after = res["after_marker"]
    print(f"2-process restore, one process's problem: {res['seconds']:.0f}s, {after}s after it")
    assert not res["timed_out"], f"killed after {DEADLINE_S}s:\n" + res["all_logs"]
    assert after is not None and after <= AFTER_S, res["all_logs"]
    assert res["codes"] == [exit_codes.CONFIG_ERROR] * 2, res["all_logs"]
    assert "no data position for this process" in res["logs"][1]
    assert "process(es) [1] found it written with other settings" in res["logs"][0]
    # Nothing was trained or written on top of the checkpoint.
    assert sorted(checkpoint_entries(ckpt)) == [str(STEPS)]
