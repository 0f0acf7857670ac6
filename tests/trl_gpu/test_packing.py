"""Packing (`--packing true`, TRL's BFD strategy, padding-free): each packed
segment keeps its own answer-only mask, and attention does not cross
segments (the logits of a packed example equal those of the example alone)."""

from __future__ import annotations

import pytest
import torch

from trainers.trl_gpu import data, templates
from trainers.trl_gpu.args import parse_args
from trainers.trl_gpu.training import build

from . import tiny
from .conftest import FAST, STYLE_FIXTURES


def _packed_trainer(model_dir, sql_file, out, *extra):
    script, training = parse_args(
        ["--model_id", str(model_dir), "--dataset_name", str(sql_file), "--output_dir", str(out),
         "--packing", "true", "--max_length", "512", "--max_steps", "2", *FAST, *extra]
    )  # fmt: skip
    trainer, _, _ = build(script, training)
    return trainer


def _segments(batch) -> list[slice]:
    positions = batch["position_ids"][0]
    starts = (positions == 0).nonzero().flatten().tolist() + [positions.numel()]
    return [slice(a, b) for a, b in zip(starts, starts[1:])]


@pytest.mark.parametrize("style", tiny.STYLES)
def test_each_packed_segment_keeps_its_answer_only_mask(style, request, sql_file, tmp_path):
    model_dir = request.getfixturevalue(STYLE_FIXTURES[style])
    trainer = _packed_trainer(model_dir, sql_file, tmp_path)
    tokenizer = trainer.processing_class
    # The unpacked examples, by their ids: each segment must be one of them, whole.
    unpacked = {tuple(ex["input_ids"]): ex["labels"] for ex in data.tokenize_split(
        data.split_rows(data.load_rows(str(sql_file), "train"), 12_500, 0.2, 42)[0], tokenizer, 512, tiny.sql_spec())}  # fmt: skip
    batch = next(iter(trainer.get_train_dataloader()))
    assert "attention_mask" not in batch and batch["input_ids"].shape[0] == 1  # padding-free: one row
    segments = _segments(batch)
    assert len(segments) > 4  # 4 packed rows per micro-batch, more than one example in a row
    marker = templates.end_of_turn_marker(tokenizer)
    for segment in segments:
        ids = batch["input_ids"][0, segment].tolist()
        labels = batch["labels"][0, segment].tolist()
        assert tuple(ids) in unpacked, "a segment is not a whole example"
        assert labels == unpacked[tuple(ids)]
        trained = [t for t, lab in zip(ids, labels) if lab != data.IGNORE_INDEX]
        assert tokenizer.decode(trained).endswith(marker)
        assert tokenizer.decode(trained)[: -len(marker)].startswith("SELECT ")


@pytest.mark.parametrize("family", ["gemma4", "gemma3"])
def test_attention_does_not_cross_packed_segments(family, request, sql_file, tmp_path):
    trainer = _packed_trainer(request.getfixturevalue(f"{family}_dir"), sql_file, tmp_path)
    model = trainer.model.eval()
    batch = next(iter(trainer.get_train_dataloader()))
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    with torch.no_grad():
        packed = model(**inputs).logits[0]
        for segment in _segments(batch)[1:]:  # every segment after the first has neighbours before it
            alone = model(input_ids=batch["input_ids"][:, segment]).logits[0]
            # Equal up to float rounding (the attention sums run over masked, longer rows).
            torch.testing.assert_close(packed[segment], alone, rtol=1e-4, atol=1e-4)
        # Without the segment boundaries the same tokens give other logits:
        # the comparison above can fail.
        flat = model(input_ids=batch["input_ids"]).logits[0]
        last = _segments(batch)[-1]
        assert not torch.allclose(flat[last], packed[last], atol=1e-3)
