"""The checkpoint a run reports is one whose write has finished: the async save of a step is only
counted once orbax has waited for it (the next save, or the close)."""

import grain
import jax.numpy as jnp
import pytest

from trainers.gemma_jax.checkpointing import Checkpointer


@pytest.fixture
def data_iter():
    it = iter(grain.MapDataset.range(8).to_iter_dataset())
    next(it)
    return it


def test_a_step_is_durable_only_once_its_write_has_been_waited_for(tmp_path, data_iter):
    ckpt = Checkpointer(str(tmp_path / "ckpt"), keep=3)
    state = {"w": jnp.arange(4.0)}
    assert ckpt.save(1, state, data_iter, {"run": "t"})
    assert ckpt.durable_step is None  # step 1 is being written
    assert ckpt.save(2, state, data_iter, {"run": "t"})
    assert ckpt.durable_step == 1  # orbax waited for step 1 before starting step 2 ...
    # ... so step 1 is whole on disk: orbax renames a step's temporary folder to its number when it finalizes it.
    assert (tmp_path / "ckpt" / "1").is_dir() and not list((tmp_path / "ckpt").glob("1.*tmp*"))
    ckpt.close()
    assert ckpt.durable_step == 2
    assert Checkpointer(str(tmp_path / "ckpt"), keep=3).all_steps() == [1, 2]


def test_a_step_saved_already_changes_nothing(tmp_path, data_iter):
    ckpt = Checkpointer(str(tmp_path / "ckpt"), keep=3)
    state = {"w": jnp.arange(4.0)}
    ckpt.save(3, state, data_iter, {})
    ckpt.wait()
    assert not ckpt.save(3, state, data_iter, {})
    assert ckpt.durable_step == 3
    ckpt.close()
