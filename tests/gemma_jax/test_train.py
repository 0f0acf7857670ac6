"""End-to-end runs of the entry point: learning, loading path, config errors."""

from __future__ import annotations

import os
import re
import shutil

import pytest

from gemma_jax_helpers import base_args, run_train
from trainers import exit_codes

pytestmark = pytest.mark.slow


def _losses(stdout: str, kind: str) -> list[float]:
    return [float(x) for x in re.findall(rf"\[{kind}\] step \d+ loss=([0-9.]+)", stdout)]


def test_loss_falls_from_pretrained_with_workers(
    tmp_path, stories_file, tokenizer_file, pretrained_dir
):
    """Real loading path: gemma tokenizer class on a local vocab, gemma's
    checkpoint loader on a locally saved checkpoint, TinyStories format,
    grain worker processes; sampling before/after; TensorBoard files."""
    args = base_args(
        stories_file,
        tokenizer_file,
        tmp_path / "ckpt",
        tmp_path / "logs",
        pretrained=pretrained_dir,
        steps=60,
        param_dtype="bfloat16",
        eval_every=20,
        log_every=10,
        data_workers=2,
        sample_tokens=8,
        save_every=100,
    )
    res = run_train(args, devices=2)
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    train, evals = _losses(out, "train"), _losses(out, "eval")
    print(out)
    # Eval before training (step 0), then every 20 steps; the first logged
    # train loss is step 1's.
    assert len(train) >= 5 and len(evals) == 4
    assert re.search(r"\[eval\] step 0 loss=", out) and re.search(r"\[train\] step 1 loss=", out)
    assert train[-1] < 0.6 * train[0], train
    assert evals[-1] < evals[0], evals
    assert "[sample before]" in out and "[sample after]" in out
    assert "tokens_per_s=" in out and "mfu=" not in out
    assert "resumed" not in out
    # The final checkpoint is in the same layout as the periodic ones.
    final = tmp_path / "ckpt" / "60"
    assert (final / "state").is_dir() and (final / "data").is_dir()
    assert any(f.startswith("events.out.tfevents") for f in os.listdir(tmp_path / "logs"))


def test_lora_fsdp_with_mfu_and_merged_export(
    tmp_path, stories_file, tokenizer_file, pretrained_dir, stacked_pretrained_dir
):
    """LoRA over a frozen base read from a stacked-layout checkpoint into
    fsdp shards over 4 devices; --export_hf merges the adapters into it."""
    args = base_args(
        stories_file,
        tokenizer_file,
        tmp_path / "ckpt",
        tmp_path / "logs",
        pretrained=stacked_pretrained_dir,
        steps=12,
        lora_rank=4,
        fsdp=True,
        peak_flops_per_device=1e11,
        log_every=4,
        profile_steps="5:6",
        export_hf=tmp_path / "export",
    )
    res = run_train(args, devices=4)
    assert res.returncode == 0, res.stdout + res.stderr
    _assert_export_is_base_plus_adapters(tmp_path, pretrained_dir, tokenizer_file)
    assert "mesh {'data': 1, 'fsdp': 4}" in res.stdout
    assert "mfu=" in res.stdout
    trainable = re.search(r"([0-9.]+)M trainable", res.stdout).group(1)
    total = re.search(r"([0-9.]+)M params", res.stdout).group(1)
    assert float(trainable) < float(total)
    assert "[xprof] trace of steps 5-6" in res.stdout
    traces = [f for _, _, fs in os.walk(tmp_path / "logs") for f in fs if f.endswith(".xplane.pb")]
    assert traces


@pytest.mark.parametrize(
    "override,flag",
    [
        ({"model": "gemma9-1t"}, "--model"),
        ({"data_path": "/nonexistent/TinyStories-train.txt"}, "--data_path"),
        ({"maxlen": 0}, "--maxlen"),
        ({"profile_steps": "7"}, "--profile_steps"),
        # A field inside a field: str.format would look up {w} in each row at start-up and crash-loop the pod.
        ({"data_format": "prompt-completion", "prompt_template": "{q:{w}}"}, "--prompt_template"),
    ],
)
def test_config_errors_exit_78(tmp_path, stories_file, tokenizer_file, override, flag, capsys):
    """The entry point's main() in this process: a flag error is found before anything starts (the process's
    own exit code 78 is shown by the test below, through a real interpreter)."""
    from trainers.gemma_jax import train  # pylint: disable=g-import-not-at-top

    args = base_args(stories_file, tokenizer_file, tmp_path / "ckpt", tmp_path / "logs", **override)
    assert train.main(args) == exit_codes.CONFIG_ERROR
    err = capsys.readouterr().err
    assert "configuration error" in err and flag in err, err


def test_a_batch_not_divisible_by_the_devices_exits_78_from_the_process(tmp_path, stories_file, tokenizer_file):
    args = base_args(stories_file, tokenizer_file, tmp_path / "ckpt", tmp_path / "logs", batch_size=6)
    res = run_train(args, devices=4)  # not a multiple of 4 devices
    assert res.returncode == exit_codes.CONFIG_ERROR, res.stdout + res.stderr
    assert "configuration error" in res.stderr and "--batch_size" in res.stderr


@pytest.fixture(scope="module")
def four_steps(tmp_path_factory, stories_file, tokenizer_file):
    """The checkpoints of a finished 4-step run (each test resumes a copy)."""
    d = tmp_path_factory.mktemp("four_steps")
    res = run_train(base_args(stories_file, tokenizer_file, d / "ckpt", d / "logs", steps=4))
    assert res.returncode == 0, res.stdout + res.stderr
    return d / "ckpt"


@pytest.mark.parametrize(
    "override,named",
    [({"maxlen": 32}, "--maxlen"), ({"lora_rank": 4}, "--lora_rank"), ({"seed": 7}, "--seed")],
)
def test_changed_settings_on_resume_exit_78_and_keep_the_checkpoints(
    tmp_path, stories_file, tokenizer_file, four_steps, override, named
):
    ckpt, logs = tmp_path / "ckpt", tmp_path / "logs"
    shutil.copytree(four_steps, ckpt)
    before = sorted(os.listdir(ckpt))
    res = run_train(base_args(stories_file, tokenizer_file, ckpt, logs, steps=8, **override))
    assert res.returncode == exit_codes.CONFIG_ERROR, res.stdout + res.stderr
    assert named in res.stderr
    assert sorted(os.listdir(ckpt)) == before  # nothing quarantined, nothing restarted


def _assert_export_is_base_plus_adapters(tmp_path, base_dir, tokenizer_file):
    import numpy as np  # pylint: disable=g-import-not-at-top
    import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top

    from gemma_jax_helpers import load_params  # pylint: disable=g-import-not-at-top
    from trainers.gemma_jax import hf, lora  # pylint: disable=g-import-not-at-top
    from trainers.gemma_jax import model as model_lib  # pylint: disable=g-import-not-at-top

    adapters = load_params(str(tmp_path / "ckpt"), 12)
    with ocp.StandardCheckpointer() as ckptr:  # the same base, nested layout
        base = ckptr.restore(base_dir)
    vocab = model_lib.load_tokenizer("tiny", tokenizer_file).vocab_size
    cfg = model_lib.build_model("tiny", vocab, "float32", 0).config
    expected = hf.from_gemma(lora.merge(base, adapters), cfg)
    unmerged = hf.from_gemma(lora.merge(base, {}), cfg)
    config, exported = hf.read_dir(str(tmp_path / "export"))
    assert config["model_type"] == "gemma3_text" and set(exported) == set(expected)
    for k in expected:
        np.testing.assert_allclose(exported[k], expected[k], rtol=1e-6, atol=1e-7, err_msg=k)
    changed = [k for k in expected if not np.array_equal(expected[k], unmerged[k])]
    assert any("q_proj" in k for k in changed) and any("down_proj" in k for k in changed)
    assert os.path.isfile(tmp_path / "export" / "tokenizer.model")


def test_a_run_resumed_inside_its_profile_window_traces_nothing_and_trains_on(
    tmp_path, stories_file, tokenizer_file, four_steps
):
    """Restarted from a checkpoint at step 4 of a 4:6 window, the process never runs the window's first
    step: it must not stop a trace it never started (a crash each restart, until the budget is spent)."""
    ckpt, logs = tmp_path / "ckpt", tmp_path / "logs"
    shutil.copytree(four_steps, ckpt)
    res = run_train(base_args(stories_file, tokenizer_file, ckpt, logs, steps=8, profile_steps="4:6"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "[checkpoint] resumed from step 4" in res.stdout and "[xprof]" not in res.stdout
