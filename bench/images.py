"""The trainer images: sizes, cold and cached build times, and what a code-only change pushes, side by side.

Run from the repository root in `.venv` (`make bench-images`), with the e2e
tools built (`make e2e-tools`):

    .venv/bin/python -m bench.images [--cold] [--out bench/results/images.json]

It starts the e2e harness's Docker engine and registry on 127.0.0.1
(e2e/harness/docker_engine.py, the base image stand-ins of base_images.py)
and builds each trainer image as `pulumi up` does (buildx, the engine's own
BuildKit, the host's network, pushed to the registry), three times in one
run: cold (`--cold`: BuildKit's cache not used, every package downloaded and
installed; skipped by default, it takes many minutes), cached (nothing
changed), and after a code-only change (a comment appended to the trainer's
entry module, in a copy of the build context). Reported per image: the
uncompressed size, the compressed size in the registry, each build's wall
time (push included), and the layers and bytes the code-only change pushed,
as a ratio of the whole image. Timings vary with the machine and its
network; nothing asserts them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

from bench import report as report_file
from core.dockerfile import REPO_ROOT, TRAINER_IMAGES, content_files
from e2e.harness import base_images, docker_engine
from e2e.harness.processes import Supervisor, start_watchdog
from e2e.harness.tools import tools

LIFETIME = 7200
# The e2e's repositories: a layer the registry has there already is not sent again.
REPOSITORY = "finetune"


def _context_copy(trainer: str, into: Path) -> Path:
    """The files the image's build uses (core/dockerfile.py), copied: a change there leaves the tree alone."""
    for rel in content_files(TRAINER_IMAGES[trainer]):
        (into / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / rel, into / rel)
    return into


def _build(engine: docker_engine.Engine, context: Path, trainer: str, tag: str, no_cache: bool = False) -> tuple[float, str]:
    """One buildx build and push (the engine's BuildKit, the host's network); its seconds and digest."""
    image = TRAINER_IMAGES[trainer]
    ref = f"{engine.registry.host}/{REPOSITORY}/{image.image_name}:bench-{tag}"
    metadata = context / f"metadata-{tag}.json"
    argv = ["buildx", "build", "--builder", "default", "--network", "host", "--push", "--provenance", "false",
            "--metadata-file", str(metadata), "-f", str(context / image.dockerfile), "-t", ref, str(context)]
    start = time.monotonic()
    engine.docker(*argv, *(["--no-cache"] if no_cache else []), timeout=7200)
    return time.monotonic() - start, json.loads(metadata.read_text())["containerimage.digest"]


def measure(engine: docker_engine.Engine, trainer: str, cold: bool) -> dict:
    image = TRAINER_IMAGES[trainer]
    repository = f"{REPOSITORY}/{image.image_name}"
    with tempfile.TemporaryDirectory(prefix=f"bench-{trainer}-") as tmp:
        context = _context_copy(trainer, Path(tmp))
        row: dict = {"image": image.image_name}
        if cold:
            row["cold_build_s"], _ = _build(engine, context, trainer, "cold", no_cache=True)
        row["cached_build_s"], digest = _build(engine, context, trainer, "base")
        entry = context / (image.entry_module.replace(".", "/") + ".py")
        with entry.open("a") as f:
            f.write(f"\n# a code-only change, {time.time()}\n")
        row["code_change_build_s"], changed = _build(engine, context, trainer, "code")
    before, after = engine.registry.layers(repository, digest), engine.registry.layers(repository, changed)
    kept = {layer["digest"] for layer in before}
    pushed = [layer["size"] for layer in after if layer["digest"] not in kept]
    total = sum(layer["size"] for layer in after)
    size = engine.docker("image", "inspect", "--format", "{{.Size}}",
                         f"{engine.registry.host}/{repository}:bench-code").stdout.strip()
    row.update({"size_bytes": int(size), "compressed_bytes": total, "layers": len(after),
                "code_change_layers_pushed": len(pushed), "code_change_bytes_pushed": sum(pushed),
                "code_change_pushed_ratio": sum(pushed) / total})
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cold", action="store_true", help="also build with BuildKit's cache off")
    parser.add_argument("--out", default="bench/results/images.json")
    opts = parser.parse_args(argv)
    state = Path(tempfile.mkdtemp(prefix="bench-images-"))
    supervisor = Supervisor(state)
    supervisor.install_handlers()
    start_watchdog(state, LIFETIME, os.getpid())
    try:
        engine = docker_engine.start(supervisor, tools(), state / "docker")
        stand_ins = base_images.ensure(engine.cli, state / "stand-ins.log")
        rows = [measure(engine, trainer, opts.cold) for trainer in TRAINER_IMAGES]
        engine.remove_containers()
    finally:
        supervisor.stop()
    print(f"{'image':<10} {'size':>9} {'pushed':>9} {'cold':>7} {'cached':>7} {'code':>7} {'code pushes':>24}")
    for r in rows:
        cold = f"{r['cold_build_s']:.0f}s" if "cold_build_s" in r else "-"
        print(f"{r['image']:<10} {r['size_bytes'] / 1e9:>8.2f}G {r['compressed_bytes'] / 1e9:>8.2f}G {cold:>7} "
              f"{r['cached_build_s']:>6.1f}s {r['code_change_build_s']:>6.1f}s "
              f"{r['code_change_bytes_pushed'] / 1e3:>8.1f} kB ({r['code_change_pushed_ratio']:.1e})")
    report_file.write({"machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                       "stand_ins": stand_ins, "images": rows}, opts.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
