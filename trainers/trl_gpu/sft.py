"""LoRA fine-tuning of a Gemma 3/4 causal LM with TRL, on text, conversational or prompt-completion data.

In the cluster (one A4 node, 8 GPUs, FSDP v2), as the run manifest launches it
(`python -m trainers.trl_gpu.launch` takes the arguments of `accelerate launch`
and makes the pod exit with the trainer's code; plain `accelerate launch` works
too but reports every failure, and SIGTERM, as 1):

```bash
python -m trainers.trl_gpu.launch --config_file trainers/trl_gpu/accelerate_fsdp_8gpu.yaml \\
    -m trainers.trl_gpu.sft \\
    --model_id google/gemma-4-31b-it \\
    --output_dir /checkpoints/<run> --logging_dir /profiles/<run>/tensorboard \\
    --push_to_hub
```

On a CPU, end to end, with a local model directory and a local data file:

```bash
python -m trainers.trl_gpu.sft \\
    --model_id ./tiny-gemma --dataset_name ./chats.jsonl --data_format conversational \\
    --output_dir /tmp/run --max_steps 20 --per_device_train_batch_size 4 \\
    --gradient_accumulation_steps 1 --learning_rate 1e-3 --activation_checkpointing false
```

Flags: `--help`, or trainers/trl_gpu/README.md. Exit codes: trainers/exit_codes.py
(0 done, 78 configuration error, 143 stopped by SIGTERM after saving a checkpoint).
"""

from __future__ import annotations

import faulthandler
import logging
import signal
import sys
import time

from trainers import exit_codes

from .args import ConfigError, parse_args
from .launch import record_exit_code


def _main(argv: list[str] | None) -> int:
    started = time.time()
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    # `kill -USR1 <pid>` prints every thread's stack: the first look at a hung rank.
    faulthandler.register(signal.SIGUSR1, file=sys.__stderr__, all_threads=True)
    try:
        script_args, training_args = parse_args(argv)
        from .training import run  # heavy imports after the flags are known to be valid

        return run(script_args, training_args, started)
    except ConfigError as err:
        print(f"configuration error: {err}", file=sys.stderr, flush=True)
        return exit_codes.CONFIG_ERROR


def main(argv: list[str] | None = None) -> int:
    code = _main(argv)
    record_exit_code(code)  # for trainers.trl_gpu.launch, which reports it as the pod's exit code
    return code


if __name__ == "__main__":
    sys.exit(main())
