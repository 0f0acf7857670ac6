"""`accelerate launch`, but the pod's exit code is the trainer's.

`accelerate launch` (torchrun underneath) exits 1 whenever a worker fails or
the launcher itself gets SIGTERM, so the codes the Job's failure policy keys
on (78: configuration error, 143: stopped after saving on SIGTERM) would be
lost at PID 1. This wrapper runs the same command as a child, forwards
SIGTERM/SIGINT to it, collects the code each worker wrote on exit, and exits
with the most telling one. Usage (same arguments as `accelerate launch`):

    python -m trainers.trl_gpu.launch --config_file trainers/trl_gpu/accelerate_fsdp_8gpu.yaml \\
        -m trainers.trl_gpu.sft --output_dir /checkpoints/run ...

torchrun gives workers TORCH_ELASTIC_SHUTDOWN_TIMEOUT seconds (30 by
default) between its SIGTERM and a SIGKILL; unless the environment sets it,
the wrapper raises it to `DEFAULT_SHUTDOWN_TIMEOUT_S` so a step can finish and
be saved. Keep it below the pod's terminationGracePeriodSeconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile

from trainers import exit_codes

EXIT_CODE_DIR_ENV = "TRAINER_EXIT_CODE_DIR"
DEFAULT_SHUTDOWN_TIMEOUT_S = 540


def record_exit_code(code: int) -> None:
    """Called by each worker as it exits (a no-op when not under this wrapper)."""
    directory = os.environ.get(EXIT_CODE_DIR_ENV)
    if directory:
        rank = os.environ.get("RANK", "0")
        with open(os.path.join(directory, f"rank-{rank}"), "w") as f:
            f.write(str(code))


def _worker_codes(directory: str) -> list[int]:
    codes = []
    for name in os.listdir(directory):
        try:
            with open(os.path.join(directory, name)) as f:
                codes.append(int(f.read().strip()))
        except (OSError, ValueError):
            continue
    return codes


def pick_exit_code(launcher_code: int, worker_codes: list[int], terminated: bool) -> int:
    if exit_codes.CONFIG_ERROR in worker_codes:
        return exit_codes.CONFIG_ERROR
    if exit_codes.TERMINATED in worker_codes:
        return exit_codes.TERMINATED
    if exit_codes.EXPORT_FAILED in worker_codes:
        return exit_codes.EXPORT_FAILED
    if launcher_code == 0:
        return exit_codes.OK
    # Killed before any worker could report: still "asked to stop", never 0.
    return exit_codes.TERMINATED if terminated else launcher_code


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    with tempfile.TemporaryDirectory(prefix="trainer-exit-") as directory:
        env = dict(os.environ, **{EXIT_CODE_DIR_ENV: directory})
        env.setdefault("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", str(DEFAULT_SHUTDOWN_TIMEOUT_S))
        child = subprocess.Popen([sys.executable, "-m", "accelerate.commands.launch", *argv], env=env)
        terminated = False

        def forward(signum, frame):
            nonlocal terminated
            terminated = terminated or signum == signal.SIGTERM
            child.send_signal(signum)

        signal.signal(signal.SIGTERM, forward)
        signal.signal(signal.SIGINT, forward)
        launcher_code = child.wait()
        return pick_exit_code(launcher_code, _worker_codes(directory), terminated)


if __name__ == "__main__":
    sys.exit(main())
