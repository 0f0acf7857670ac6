"""Fine-tune Gemma on TinyStories with JAX: the trainer's entry point.

In the cluster (TPU; one process per host, jax.distributed picks up GKE's
environment; the run manifest passes the accelerator's peak FLOP/s):

    python -m trainers.gemma_jax.train \\
        --model gemma3-270m --maxlen 256 --batch_size 128 --datacount 296000 \\
        --data_path /data/TinyStories-train.txt \\
        --checkpoint_dir /checkpoints/<run> --log_dir /profile/<run> \\
        --peak_flops_per_device <peak bf16 FLOP/s of one chip>

Locally on CPU, with no download (a few-layer random Gemma 3 and a local
SentencePiece model whose ids 0-3 are pad/eos/bos/unk, as Gemma's):

    python -m trainers.gemma_jax.train --model tiny --tokenizer tok.model \\
        --pretrained none --data_path stories.txt --datacount 2000 \\
        --maxlen 128 --batch_size 8 --steps 50 --learning_rate 1e-3 \\
        --checkpoint_dir /tmp/ckpt --log_dir /tmp/logs --data_workers 0

Run it again with the same --checkpoint_dir and it resumes from the last
complete checkpoint. Exit codes: 0 done, 78 configuration error, 143 stopped
by SIGTERM after writing a checkpoint. Flags: --help; details: README.md.
"""

from __future__ import annotations

import sys

from trainers import exit_codes


def main(argv: list[str] | None = None) -> int:
    from trainers.gemma_jax import cli  # pylint: disable=g-import-not-at-top

    try:
        cfg = cli.parse_args(argv)
        from trainers.gemma_jax import trainer  # pylint: disable=g-import-not-at-top

        return trainer.run(cfg)
    except cli.ConfigError as e:
        print(f"configuration error: {e}", file=sys.stderr, flush=True)
        return exit_codes.CONFIG_ERROR


if __name__ == "__main__":
    sys.exit(main())
