"""The train step compiled ahead of time for a TPU slice, on a machine without one.

    python -m trainers.gemma_jax.aot --topology 2x4 [--slices 2] -- <the run's trainer flags>

prints one JSON object: what the TPU compiler (the libtpu that `jax[tpu]`
pins, installed from PyPI) assigns per chip to exactly the step the trainer
runs (same model, optimizer, shardings and mesh code, for the slice's own
devices), the HBM it says one chip offers, the compile's wall time here, and
a fingerprint of the lowered program. `--lower-only` stops before the
compile (seconds instead of many minutes): the fingerprint alone tells
whether a table of compiled figures is still about the current code.

Why this works without a TPU: `jax.experimental.topologies.get_topology_desc`
asks libtpu for compile-only devices of a named topology (v6e:2x4 is two
hosts of four chips; `num_slices` adds the Megascale slice index), and
`jit(...).lower(...).compile()` runs the real TPU compiler for them; only
executing needs the chips. The per-chip figure is the compiler's buffer
assignment: arguments + outputs - what donation aliases + temporaries +
the program's code (`Compiled.memory_analysis()`).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import re
import sys
import time

GIB = 2**30
# The compiler's own out-of-memory error names the HBM it may use:
# "... exceeds available HBM (31.24G)" (G: GiB, XLA's HumanReadableNumBytes).
_AVAILABLE_HBM = re.compile(r"available HBM \(([0-9.]+)G\)")


# Set before libtpu loads. It owns no chip here, so several compiles (and
# the tests) may load it at once: libtpu otherwise takes /tmp/libtpu_lockfile
# and a second process aborts (ALLOW_MULTIPLE_LIBTPU_LOAD, as jax's own
# jax/_src/test_multiprocess.py and orbax's multihost test runner set it);
# and there is no GCE metadata server to ask (TPU_SKIP_MDS_QUERY, read by
# jax/_src/clusters/cloud_tpu_cluster.py and jax/_src/cloud_tpu_init.py).
COMPILE_ONLY_ENV = {"ALLOW_MULTIPLE_LIBTPU_LOAD": "1", "TPU_SKIP_MDS_QUERY": "1"}


def topology_devices(name: str, slices: int = 1):
    """The compile-only devices of `slices` v6e slices of topology `name`."""
    for key, value in COMPILE_ONLY_ENV.items():
        os.environ.setdefault(key, value)
    from jax.experimental import topologies  # pylint: disable=g-import-not-at-top

    kwargs = {"num_slices": slices} if slices > 1 else {}
    return topologies.get_topology_desc(f"v6e:{name}", "tpu", **kwargs).devices


def abstract_inputs(cfg, devices):
    """(train step, its abstract arguments) for `cfg` on `devices`, built by
    the trainer's own code (components, sharding, steps)."""
    import jax  # pylint: disable=g-import-not-at-top
    import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

    from trainers.gemma_jax import components as comp  # pylint: disable=g-import-not-at-top
    from trainers.gemma_jax import model as model_lib  # pylint: disable=g-import-not-at-top
    from trainers.gemma_jax import sharding, steps  # pylint: disable=g-import-not-at-top

    # One process per host of each slice, as the JobSet runs them.
    processes = len({d.process_index for d in devices}) * sharding.num_slices(devices)
    layout = comp.make_layout(cfg, devices, processes)
    tokenizer = model_lib.load_tokenizer(cfg.model, cfg.tokenizer) if cfg.model.startswith("tiny") else None
    parts = comp.model_parts(cfg, layout, tokenizer, tokenizer.vocab_size if tokenizer else 0)
    frozen = jax.tree.map(
        lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
        parts.abstract_frozen, parts.frozen_shardings,
    )
    rows = jax.ShapeDtypeStruct((cfg.batch_size, cfg.maxlen), jnp.int32,
                                sharding=sharding.batch_sharding(layout.mesh))
    batch = {"tokens": rows, "segment_ids": rows, "positions": rows}
    if comp.needs_loss_mask(cfg):
        batch["loss_mask"] = rows
    step = steps.make_train_step(parts.model, parts.optimizer, parts.lora, parts.state_shardings)
    return step, (parts.abstract_state, frozen, batch)


def available_hbm_gib(device) -> float:
    """The HBM one chip offers, as the compiler states it: compile a program
    that can't fit and read the figure from its CompileTimeHbmOom error."""
    import jax  # pylint: disable=g-import-not-at-top
    import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

    huge = jax.ShapeDtypeStruct((256 * GIB,), jnp.uint8,
                                sharding=jax.sharding.SingleDeviceSharding(device))
    try:
        jax.jit(lambda x: x + 1).lower(huge).compile()
    except Exception as e:  # pylint: disable=broad-except  (JaxRuntimeError)
        found = _AVAILABLE_HBM.search(str(e))
        if found:
            return float(found.group(1))
        raise
    raise RuntimeError("a 256 GiB program compiled for one v6e chip: no HBM limit to read")


def fingerprint(lowered_text: str, topology: str, slices: int) -> str:
    """Names the compiled program: its StableHLO, the target, the compiler."""
    h = hashlib.sha256()
    for part in (lowered_text, f"v6e:{topology}", str(slices), versions()["libtpu"]):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def versions() -> dict[str, str]:
    return {name: importlib.metadata.version(name) for name in ("jax", "jaxlib", "libtpu")}


def memory_figures(stats) -> dict[str, int]:
    fields = ("argument", "output", "alias", "temp", "generated_code")
    out = {f: int(getattr(stats, f"{f}_size_in_bytes")) for f in fields}
    out["per_chip"] = out["argument"] + out["output"] - out["alias"] + out["temp"] + out["generated_code"]
    return out


def compile_run(argv: list[str], topology: str, slices: int, lower_only: bool = False) -> dict:
    """What the compiler says of the run's train step on its slice(s)."""
    from trainers.gemma_jax import flags  # pylint: disable=g-import-not-at-top

    cfg = flags.parse(argv)
    devices = topology_devices(topology, slices)
    step, args = abstract_inputs(cfg, devices)
    t0 = time.time()
    lowered = step.lower(*args)
    report = {
        "topology": topology, "slices": slices, "chips": len(devices),
        "fingerprint": fingerprint(lowered.as_text(), topology, slices),
        "lower_s": round(time.time() - t0, 1), **versions(),
    }
    if lower_only:
        return report
    report["hbm_gib"] = available_hbm_gib(devices[0])
    t0 = time.time()
    try:
        compiled = lowered.compile()
    except Exception as e:  # pylint: disable=broad-except  (JaxRuntimeError)
        if "CompileTimeHbmOom" not in str(e):
            raise
        report.update(compile_s=round(time.time() - t0, 1), fits=False, error=str(e).splitlines()[0])
        return report
    report["compile_s"] = round(time.time() - t0, 1)
    report["bytes"] = memory_figures(compiled.memory_analysis())
    report["fits"] = report["bytes"]["per_chip"] <= report["hbm_gib"] * GIB
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--topology", required=True, help="v6e slice topology, e.g. 1x1, 2x4")
    p.add_argument("--slices", type=int, default=1, help="slices of a multislice run")
    p.add_argument("--lower-only", action="store_true", help="fingerprint only, no compile")
    p.add_argument("trainer_flags", nargs=argparse.REMAINDER, help="-- then the run's flags")
    args = p.parse_args(argv)
    flags_ = args.trainer_flags[1:] if args.trainer_flags[:1] == ["--"] else args.trainer_flags
    # The attached devices stay the CPU: only the topology's compile-only
    # devices are the TPU's (no TPU is initialised, nothing waits for one).
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    report = compile_run(flags_, args.topology, args.slices, args.lower_only)
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
