"""What the TPU compiler says each shipped TPU run's train step needs per chip.

The figures in compiled_hbm.json come from the real compiler (libtpu, as
the trainer image pins it) compiling the trainer's own step for the run's
own slice ahead of time (trainers/gemma_jax/aot.py). `make tpu-compile`
rewrites the table; tests/gemma_jax/test_compiled_hbm.py fails when a
shipped run's program is not the one the table was compiled from, or when
one doesn't leave MARGIN_GIB free. The platform only reads the table: it
imports nothing of the trainers.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib

from core.trainers import TRAINERS

TABLE = pathlib.Path(__file__).with_name("compiled_hbm.json")
GIB = 2**30

# HBM per chip left free beyond the compiler's figure for the step. The
# compiler's figure is the step's whole buffer assignment (state, batch,
# temporaries, code); what it can't see lives beside it at run time: the
# eval step's and the sampler's programs and buffers (the sampler's KV
# cache of 1024 positions), the arrays Orbax copies out while saving, and
# the runtime allocator's fragmentation of argument buffers.
MARGIN_GIB = 1.0


@dataclasses.dataclass(frozen=True)
class Compiled:
    per_chip_gib: float | None  # None: the compiler refused it (CompileTimeHbmOom)
    hbm_gib: float
    topology: str
    slices: int
    libtpu: str
    compile_s: float
    current: bool  # compiled from the flags the run passes today

    @property
    def spare_gib(self) -> float | None:
        return None if self.per_chip_gib is None else self.hbm_gib - self.per_chip_gib

    @property
    def fits(self) -> bool:
        return self.spare_gib is not None and self.spare_gib >= MARGIN_GIB


def read() -> dict:
    return json.loads(TABLE.read_text())["runs"] if TABLE.exists() else {}


def step_args(args: list[str]) -> list[str]:
    """`args` without the flags that change what is done after training, not the train step the compiler
    compiled: the export's and the evaluation's (core/trainers.py ExportFlags), each with its value."""
    after = frozenset().union(*(t.export_flags.flags for t in TRAINERS.values() if t.export_flags))
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg.split("=", 1)[0] in after:
            skip = "=" not in arg
        else:
            kept.append(arg)
    return kept


def lookup(stack: str, run: str, args: list[str]) -> Compiled | None:
    """The compiler's figure for one run, or None when it was never compiled."""
    entry = read().get(f"{stack}/{run}")
    if entry is None:
        return None
    per_chip = entry.get("bytes", {}).get("per_chip")
    return Compiled(
        per_chip_gib=None if per_chip is None else per_chip / GIB,
        hbm_gib=entry["hbm_gib"],
        topology=entry["topology"],
        slices=entry["slices"],
        libtpu=entry["libtpu"],
        compile_s=entry["compile_s"],
        current=step_args(entry["args"]) == step_args(list(args)),
    )
