"""`make check-data` over a million rows against a plain `datasets` load of the same file.

    .venv/bin/python -m bench.check_data [--rows 1000000]   # writes bench/results/check_data.json

One JSON Lines file of conversational rows (a user turn, an assistant turn) is written once, then read
side by side in one run, each in a process of its own so that peak memory is its own (the child's
maximum resident set, from os.wait4):

- check-data: `python -m tools.data check --json` on a stack whose JAX run reads the file (.venv): every
  row through the trainers' reader and format rules, rendered with the Gemma 3 chat template and
  tokenized with the real Gemma 3 tokenizer (the GGUF's, as the tests take it:
  tests/support/weights_cache.py), the rows packed by the JAX trainer's plan, the split, examples;
- datasets: `datasets.load_dataset("json", data_files=...)` and one pass over its rows (.venv-gpu, the
  GPU trainer's environment, where `datasets` is pinned): the load a trainer does before it checks
  anything, written to Arrow and memory-mapped.

- check-data where no tokenizer is found (an empty Hugging Face cache): the same, lengths in characters,
  no packing figure: what the reading and the format rules cost apart from the template and tokenizer.

Reported: rows per second and peak memory of each, and the ratios of check-data's to the load's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from tests.support.weights_cache import cached_hf_tokenizer

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "bench" / "results" / "check_data.json"
DATASETS_LOAD = """
import sys, datasets
datasets.disable_progress_bars()
d = datasets.load_dataset("json", data_files=sys.argv[1], split="train", cache_dir=sys.argv[2])
n = sum(1 for _ in d)
assert n == int(sys.argv[3]), n
"""


def write_rows(path: Path, rows: int) -> None:
    with path.open("w") as f:
        for i in range(rows):
            f.write(json.dumps({"messages": [{"role": "user", "content": f"Question {i}: what is {i} + {i}?"},
                                             {"role": "assistant", "content": f"{i} + {i} is {2 * i}."}]}) + "\n")


def write_stack(root: Path, data: Path) -> None:
    shutil.copy(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    doc = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    doc["config"]["gke-finetune:datasets"] = [{"name": "bench", "path": data.relative_to(root).as_posix()}]
    doc["config"]["gke-finetune:runs"] = [{"name": "chat", "trainer": "gemma-jax", "pool": "v6e-1x1",
                                           "data": "bench", "format": "conversational"}]
    (root / "Pulumi.bench.yaml").write_text(yaml.safe_dump(doc))


def timed(cmd: list[str], out: Path, env: dict | None = None) -> dict:
    """Seconds and peak resident memory (MiB) of one child process: os.wait4's own rusage of that child."""
    start = time.perf_counter()
    with out.open("w") as stdout, tempfile.TemporaryFile("w+") as stderr:
        child = subprocess.Popen(cmd, cwd=ROOT, stdout=stdout, stderr=stderr, text=True, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode:
            stderr.seek(0)
            raise SystemExit(f"{' '.join(cmd[:4])}: exit {child.returncode}\n{stderr.read()[-2000:]}")
    return {"seconds": round(seconds, 2), "peak_mib": round(usage.ru_maxrss / 1024, 1)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    tokenizer = cached_hf_tokenizer()  # the real Gemma 3 tokenizer, as the tests use it
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "data").mkdir()
        data = tmp / "data" / "train.jsonl"
        write_rows(data, args.rows)
        write_stack(tmp, tmp / "data")
        gpu_python = str(ROOT / ".venv-gpu" / "bin" / "python")
        loaded = timed([gpu_python, "-c", DATASETS_LOAD, str(data), str(tmp / "hf"), str(args.rows)], tmp / "load")
        command = [sys.executable, "-m", "tools.data", "check", "--stack", "bench", "--run", "chat", "--json",
                   "--quiet", "--root", str(tmp)]
        check = timed([*command, "--tokenizer", tokenizer], tmp / "check.json")
        report = json.loads((tmp / "check.json").read_text())
        assert report["rows"] == args.rows and report["bad_rows_total"] == 0, report
        assert report["lengths_in"] == "tokens", report.get("tokens_not_counted")
        # The same check where no tokenizer is found (an empty Hugging Face cache): lengths in characters.
        characters = timed(command, tmp / "characters.json", env={**os.environ, "HF_HUB_CACHE": str(tmp / "hub")})
        assert json.loads((tmp / "characters.json").read_text())["lengths_in"] == "characters"
        size_mib = data.stat().st_size / 2**20
    result = {
        "rows": args.rows, "file_mib": round(size_mib, 1), "cpus": os.cpu_count(),
        "tokens": {k: report["tokens"][k] for k in ("p50", "p95", "max", "total")},
        "packing_efficiency": report["tokens"]["packing"]["efficiency"],
        "check_data": {**check, "rows_per_s": round(args.rows / check["seconds"])},
        "check_data_characters": {**characters, "rows_per_s": round(args.rows / characters["seconds"])},
        "datasets_load": {**loaded, "rows_per_s": round(args.rows / loaded["seconds"])},
        "time_ratio_check_over_load": round(check["seconds"] / loaded["seconds"], 2),
        "memory_ratio_check_over_load": round(check["peak_mib"] / loaded["peak_mib"], 2),
    }
    RESULT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
