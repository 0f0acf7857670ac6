"""What the TPU compiler says a train step needs per chip, keyed by what determines it.

The figures in compiled_hbm.json come from the real compiler (libtpu, as
the trainer image pins it) compiling the trainer's own step ahead of time
(trainers/gemma_jax/aot.py). Each figure belongs to a program, not to a
stack or a run: its key is what the step is built from (the model, its
batch and sequence length, LoRA rank, FSDP, dtypes, whether batches carry
a loss mask) and the slice it is compiled for (topology, slices), as the
trainer's memory module derives it from a run's flags
(trainers/gemma_jax/memory.py `program_key`). A copied stack or a renamed
run with the same program keeps its figure; a run whose program nobody
compiled has none, and the plan says so.

`make tpu-compile` rewrites the table for the shipped runs;
tests/gemma_jax/test_compiled_hbm.py fails when a shipped run's program is
not the one its entry was compiled from, or when one doesn't leave
MARGIN_GIB free. The platform only reads the table: it imports nothing of
the trainers.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from collections.abc import Mapping

TABLE = pathlib.Path(__file__).with_name("compiled_hbm.json")
GIB = 2**30

# HBM per chip left free beyond the compiler's figure for the step. The
# compiler's figure is the step's whole buffer assignment (state, batch,
# temporaries, code); what it can't see lives beside it at run time: the
# eval step's and the sampler's programs and buffers (the sampler's KV
# cache of 1024 positions), the arrays Orbax copies out while saving, and
# the runtime allocator's fragmentation of argument buffers.
MARGIN_GIB = 1.0

# The key's fields, in the order its name lists them.
KEY_FIELDS = ("model", "batch_size", "maxlen", "lora_rank", "fsdp", "param_dtype", "master_dtype", "loss_mask",
              "topology", "slices")


@dataclasses.dataclass(frozen=True)
class Compiled:
    per_chip_gib: float | None  # None: the compiler refused it (CompileTimeHbmOom)
    hbm_gib: float
    topology: str
    slices: int
    libtpu: str
    compile_s: float

    @property
    def spare_gib(self) -> float | None:
        return None if self.per_chip_gib is None else self.hbm_gib - self.per_chip_gib

    @property
    def fits(self) -> bool:
        return self.spare_gib is not None and self.spare_gib >= MARGIN_GIB


def key_name(key: Mapping) -> str:
    """The table's name of a program key, e.g. 'gemma3-270m batch_size=64 maxlen=256 ... topology=1x1 slices=1'."""
    missing = [f for f in KEY_FIELDS if f not in key]
    if missing:
        raise KeyError(f"a program key needs {', '.join(missing)}")
    fields = " ".join(f"{f}={_text(key[f])}" for f in KEY_FIELDS[1:])
    return f"{key['model']} {fields}"


def describe(key: Mapping) -> str:
    """A program key in a sentence, for the plan."""
    slices = f" x{key['slices']}" if key["slices"] > 1 else ""
    lora = f", LoRA rank {key['lora_rank']}" if key["lora_rank"] else ", full fine-tune"
    return (f"{key['model']}{lora}, batch {key['batch_size']} x {key['maxlen']} tokens, fsdp {key['fsdp']}, "
            f"{key['param_dtype']}/{key['master_dtype']}{', loss mask' if key['loss_mask'] else ''} "
            f"on v6e {key['topology']}{slices}")


def _text(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def read() -> dict:
    """{key name: entry} of every compiled program."""
    return json.loads(TABLE.read_text())["programs"] if TABLE.exists() else {}


def lookup(key: Mapping) -> Compiled | None:
    """The compiler's figure for one program, or None when nobody compiled it."""
    entry = read().get(key_name(key))
    if entry is None:
        return None
    per_chip = entry.get("bytes", {}).get("per_chip")
    return Compiled(
        per_chip_gib=None if per_chip is None else per_chip / GIB,
        hbm_gib=entry["hbm_gib"],
        topology=entry["key"]["topology"],
        slices=entry["key"]["slices"],
        libtpu=entry["libtpu"],
        compile_s=entry["compile_s"],
    )
