"""The trainers inside their images: pulled by digest from the registry, run as the runs' manifests run them.

Each run is the container of a shipped run's JobSet as the API server has it
after `pulumi up` of the images stack (e2e/harness/delivery.py): its image by
the pushed digest, its command (the image's entrypoint, as the platform
launches it) and args, env, user, group and working directory, the bucket's
volumes as host directories where the manifest mounts them
(e2e/harness/container_run.py), and no network. Appended to the args, and
said here: tiny model, tokenizer, data and step counts for a CPU, and
`JAX_PLATFORMS=cpu` in place of the TPU. Inputs are made inside the image
(e2e/harness/in_image/, tests/trl_gpu/tiny.py).

- JAX: train, SIGTERM after step 9 (exit 143, a checkpoint of the last step),
  resume with no step redone, export to Hugging Face format.
- GPU trainer: its tiny run (the manifest's trainer module on one CPU process),
  and `make fsdp-cpu`'s check (the shipped accelerate FSDP config on 2 CPU
  processes, SIGTERM, resume, final adapter) inside the GPU image.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from e2e.harness import container_run
from e2e.harness.container_run import ContainerRun
from e2e.harness.delivery import Delivery, pod_spec
from e2e.harness.tools import ROOT

IN_IMAGE = ROOT / "e2e" / "harness" / "in_image"
SIGTERM_AFTER = 9
# Enough steps after the one the SIGTERM follows that the run is still training when the signal lands
# (a tiny step takes about 10 ms on a quiet machine: 24 steps were over before `docker kill` arrived).
JAX_STEPS = 400
EXIT_TERMINATED = 143
TINY_JAX = ["--model", "tiny", "--pretrained", "none", "--tokenizer", "/data/e2e/tok.model",
            "--data_path", "/data/e2e/stories.txt", "--datacount", "2800", "--eval_stories", "64",
            "--maxlen", "64", "--batch_size", "8", "--steps", str(JAX_STEPS), "--learning_rate", "3e-3",
            "--param_dtype", "float32", "--save_every", "1000", "--eval_every", "0", "--log_every", "1",
            "--data_workers", "0", "--sample_tokens", "0", "--export_hf", "/checkpoints/hf"]
TINY_GPU = ["--model_id", "/data/e2e/tiny-gemma4", "--dataset_name", "/data/e2e/text_to_sql.jsonl",
            "--max_steps", "6", "--save_steps", "3", "--eval_strategy", "no", "--per_device_train_batch_size", "2",
            "--gradient_accumulation_steps", "1", "--learning_rate", "5e-3", "--logging_steps", "1",
            "--report_to", "none", "--dataloader_num_workers", "0", "--max_samples", "40"]
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def _run_of(delivery: Delivery, trainer: str, workdir: Path) -> tuple[ContainerRun, dict[str, Path], str]:
    """The trainer's first run: its container as the manifest gives it, host directories for its volumes,
    and its image pulled by digest from the registry."""
    run = next(r for r, t in delivery.runs.items() if t == trainer)
    pod = pod_spec(delivery.jobsets()[run])
    container = container_run.from_pod(pod)
    volumes = container_run.volume_dirs(pod, workdir / trainer, files={"hf-token": {"token": "e2e-not-a-token"}})
    pulled = container_run.pull(delivery.docker, container.image)
    assert container.image.split("@")[1] in pulled, (container.image, pulled)
    return container, volumes, run


def _make_inputs(delivery: Delivery, container: ContainerRun, volumes: dict[str, Path], *command: str,
                 mounts: tuple[str, ...] = ()) -> None:
    """Run `command` in the image (its user, the data volume writable) to write the inputs to /data/e2e."""
    user = ["--user", f"{container.user}:{container.group}"] if container.user is not None else []
    extra = [a for m in mounts for a in ("--volume", m)]
    delivery.docker.docker("run", "--rm", "--network", "none", *user, "--workdir", "/app",
                           "--volume", f"{volumes['data']}:/data", *extra, container.image, *command)


def _wait_for_step(started, step: int, timeout: float = 600.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logs = started.logs()
        steps = [int(s) for s in re.findall(r"^\[train\] step (\d+) ", logs, re.MULTILINE)]
        if steps and max(steps) >= step:
            return logs
        if "exited" in started.engine.docker("inspect", "--format", "{{.State.Status}}", started.name).stdout:
            raise AssertionError(f"the run ended before step {step}:\n{logs[-3000:]}")
        time.sleep(0.5)
    raise AssertionError(f"no step {step} within {timeout:.0f}s:\n{started.logs()[-3000:]}")


def test_the_jax_trainer_trains_stops_resumes_and_exports_inside_its_image(delivery, tmp_path):
    delivery.ensure_up()
    container, volumes, run = _run_of(delivery, "gemma-jax", tmp_path)
    (volumes["data"] / "e2e").mkdir()
    _make_inputs(delivery, container, volumes, "python", "/e2e/jax_inputs.py", "/data/e2e",
                 mounts=(f"{IN_IMAGE}:/e2e:ro",))
    cpu = {"JAX_PLATFORMS": "cpu"}
    started = time.monotonic()
    first = container_run.start(delivery.docker, container, volumes, "e2e-jax-first", extra_args=TINY_JAX,
                                extra_env=cpu)
    try:
        _wait_for_step(first, SIGTERM_AFTER)
        first.signal("TERM")
        assert first.wait() == EXIT_TERMINATED, first.logs()[-3000:]
        first_log = first.logs()
    finally:
        first.remove()
    stopped = int(re.search(r"checkpoint of step (\d+) written", first_log).group(1))
    progress = volumes["checkpoints"] / "progress.json"
    before = json.loads(progress.read_text())
    code, second_log = container_run.run_to_end(delivery.docker, container, volumes, "e2e-jax-second",
                                                extra_args=TINY_JAX, extra_env=cpu)
    assert code == 0, second_log[-3000:]
    assert f"resumed from step {stopped}" in second_log
    after = json.loads(progress.read_text())
    assert (after["step"], after["starts"], after["redone_steps"]) == (JAX_STEPS, 2, 0)
    exported = volumes["checkpoints"] / "hf"
    assert (exported / "config.json").is_file() and list(exported.glob("*.safetensors")), sorted(exported.iterdir())
    delivery.report.append(
        f"== gemma-jax inside {container.image} (run {run}'s command and args + the tiny CPU flags): "
        f"SIGTERM once step {SIGTERM_AFTER} was logged -> exit 143, checkpoint of step {stopped} (loss {before['loss']:.3f}); "
        f"resumed from step {stopped}, Δ {after['redone_steps']} steps redone, step {after['step']} loss "
        f"{after['loss']:.3f}; Hugging Face export {sorted(p.name for p in exported.iterdir())}; "
        f"{time.monotonic() - started:.0f}s")


def test_the_gpu_trainer_s_tiny_run_inside_its_image(delivery, tmp_path):
    delivery.ensure_up()
    container, volumes, run = _run_of(delivery, "trl-gpu", tmp_path)
    tests = f"{ROOT / 'tests'}:/app/tests:ro"
    _make_inputs(delivery, container, volumes, "python", "-c",
                 "from pathlib import Path; from tests.trl_gpu.fsdp_cpu import write_inputs; "
                 "write_inputs(Path('/data/e2e'), 'gemma4')", mounts=(tests,))
    # The trainer module the manifest's launcher runs (`-m trainers.trl_gpu.sft`), on one CPU process.
    module = container.command[container.command.index("-m", 3) + 1]
    assert module == "trainers.trl_gpu.sft", container.command
    tiny = ContainerRun(**{**container.__dict__, "command": ["python", "-m", module]})
    started = time.monotonic()
    code, log = container_run.run_to_end(delivery.docker, tiny, volumes, "e2e-gpu-tiny", extra_args=TINY_GPU,
                                         extra_env=OFFLINE)
    assert code == 0, log[-3000:]
    out = volumes["checkpoints"]
    assert (out / "adapter_model.safetensors").is_file(), sorted(p.name for p in out.iterdir())
    record = json.loads((out / "progress.json").read_text())
    assert (record["step"], record["starts"], record["redone_steps"]) == (6, 1, 0) and record["loss"] > 0
    assert f"held-out loss after training: {record['eval_loss']:.4f}" in log
    delivery.report.append(
        f"== trl-gpu inside {container.image} (run {run}'s trainer module and args + the tiny CPU flags): "
        f"6 steps, training loss {record['loss']:.3f}, held-out loss {record['eval_loss']:.3f}, checkpoints "
        f"{sorted(p.name for p in out.glob('checkpoint-*'))}, final adapter; {time.monotonic() - started:.0f}s")


def test_the_gpu_trainer_s_fsdp_path_runs_inside_its_image(delivery, tmp_path):
    delivery.ensure_up()
    container, volumes, run = _run_of(delivery, "trl-gpu", tmp_path)
    started = time.monotonic()
    user = ["--user", f"{container.user}:{container.group}"]
    done = delivery.docker.docker(
        "run", "--rm", "--network", "none", *user, "--workdir", "/app", "--env", "PYTHONUNBUFFERED=1",
        "--volume", f"{ROOT / 'tests'}:/app/tests:ro", "--volume", f"{volumes['checkpoints']}:/checkpoints",
        # The check trains with the shipped text-to-SQL run's data settings, read from its stack file.
        "--volume", f"{ROOT / 'Pulumi.a4.yaml'}:/app/Pulumi.a4.yaml:ro",
        container.image, "python", "-m", "tests.trl_gpu.fsdp_cpu", "--out", "/checkpoints/fsdp", check=False)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    summary = json.loads(done.stdout[done.stdout.index("{"):])
    assert summary["first_run_exit"] == EXIT_TERMINATED and summary["second_run_exit"] == 0, summary
    assert (volumes["checkpoints"] / "fsdp" / "adapter_model.safetensors").is_file()
    delivery.report.append(
        f"== trl-gpu FSDP on 2 CPU processes inside {container.image} (make fsdp-cpu's check, the shipped "
        f"accelerate config): SIGTERM after step {summary['stopped_at_step']} -> exit 143, resumed, checkpoints "
        f"{summary['checkpoints']}, final adapter; {time.monotonic() - started:.0f}s")
