"""The progress record both trainers write (trainers/progress.py): what a restart carries over, what it
takes back (steps trained twice), who writes, and that a write is whole. The reader's side, and the record
as `make status` validates it, are in tests/tools/test_status.py; each trainer's real runs write it too
(tests/gemma_jax/test_resume.py, tests/trl_gpu/test_train.py)."""

from __future__ import annotations

import json

from trainers import progress

T0 = 1_800_000_000.0


class Clock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_first_start_counts_its_setup_as_restore_time_and_names_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv(progress.RUN_ENV, "my-run")
    clock = Clock(T0 + 30)
    p = progress.Progress(str(tmp_path), "gemma-jax", 100, started=T0, clock=clock)
    p.resumed(0)
    p.first_step(1, loss=3.5)
    clock.now += 10
    p.trained(10, 10.0, loss=2.0, tokens_per_s=500.0)
    record = progress.read(str(tmp_path))
    assert (record["run"], record["trainer"], record["step"], record["total_steps"]) == ("my-run", "gemma-jax", 10, 100)
    assert (record["restore_seconds"], record["train_seconds"], record["starts"]) == (30.0, 10.0, 1)
    assert record["checkpoint_step"] is None and record["started_at"] == progress.iso(T0)
    assert record["updated_at"] == progress.iso(T0 + 40)


def test_a_restart_from_an_older_checkpoint_takes_back_the_steps_it_redoes(tmp_path):
    first = progress.Progress(str(tmp_path), "trl-gpu", 100, started=T0, clock=Clock(T0 + 5))
    first.resumed(0)
    first.first_step(1)
    first.trained(40, 80.0)  # 2 s a step
    first.checkpointed(30)
    first.evaluated(30, 1.5)
    again = progress.Progress(str(tmp_path), "trl-gpu", 100, started=T0 + 1000, clock=Clock(T0 + 1020))
    again.resumed(30)  # the steps 31 to 40 are trained again
    again.first_step(31)
    record = progress.read(str(tmp_path))
    assert (record["starts"], record["redone_steps"], record["train_seconds"]) == (2, 10, 60.0)
    assert record["restore_seconds"] == 5.0 + 20.0
    assert record["started_at"] == progress.iso(T0) and record["attempt_started_at"] == progress.iso(T0 + 1000)
    assert (record["eval_loss"], record["eval_step"], record["checkpoint_step"]) == (1.5, 30, 30)


def test_only_the_owning_process_writes(tmp_path):
    p = progress.Progress(str(tmp_path), "gemma-jax", 10, started=T0, enabled=False)
    p.resumed(0)
    p.first_step(1)
    p.trained(2, 1.0)
    assert list(tmp_path.iterdir()) == []


def test_each_write_is_whole_and_leaves_no_temporary_file(tmp_path):
    p = progress.Progress(str(tmp_path / "ckpt"), "gemma-jax", 10, started=T0, clock=Clock(T0))
    for step in range(1, 4):
        p.trained(step, 1.0)
    assert [f.name for f in (tmp_path / "ckpt").iterdir()] == [progress.FILE]
    assert json.loads((tmp_path / "ckpt" / progress.FILE).read_text())["step"] == 3


def test_a_record_that_is_not_one_is_read_as_none_and_a_start_begins_afresh(tmp_path):
    (tmp_path / progress.FILE).write_text("{not json")
    assert progress.read(str(tmp_path)) is None
    (tmp_path / progress.FILE).write_text(json.dumps({"schema": 99, "starts": 7}))
    assert progress.read(str(tmp_path)) is None
    assert progress.Progress(str(tmp_path), "gemma-jax", 10, started=T0).record["starts"] == 1
