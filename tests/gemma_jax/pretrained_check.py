"""Run in a subprocess with several host devices (see test_pretrained.py):
saves a tiny Gemma 3 in one of gemma's checkpoint layouts, loads it with the
trainer's loader into fsdp shardings, and prints what it found as JSON.

    python pretrained_check.py DIR

prints {"<layout>-<loader>": result} for every layout (nested, stacked,
vision = nested plus a vision tower) and loader (trainer, or gemma's own
gm.ckpts.load_params for comparison).
"""

from __future__ import annotations

import json
import os
import sys

from gemma import gm
from gemma.gm.ckpts import _checkpoint as gemma_ckpt
import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from orbax.checkpoint._src.serialization import jax_array_handlers

from trainers.gemma_jax import model as model_lib
from trainers.gemma_jax import pretrained
from trainers.gemma_jax import sharding

VOCAB = 64
ORIGINAL = jax_array_handlers.ArrayHandler.deserialize


def tiny_params():
    model = model_lib.build_model("tiny", VOCAB, "float32", 0)
    params = model.init(jax.random.key(3), jnp.zeros((1, 8), jnp.int32))["params"]
    return model, jax.tree.map(np.asarray, params)


def save(layout: str, params, path: str) -> None:
    tree = dict(params)
    if layout == "stacked":
        # One attention type: both layers in one stacked array of 2 layers,
        # fewer than the 4 devices the layer axis must then not be split over.
        tree = gemma_ckpt._nested_to_stacked(params, 1)  # pylint: disable=protected-access
    if layout == "vision":
        tree["vision_encoder"] = {"patch": {"w": np.ones((256, 1024), np.float32)}}
        tree["embedder"] = dict(tree["embedder"], mm_input_projection={"w": np.ones((8, 64))})
    with ocp.StandardCheckpointer() as ckptr:
        ckptr.save(path, tree)


def spy_reads() -> list[str]:
    """Names of the arrays orbax deserializes from now on."""
    names: list[str] = []

    async def deserialize(self, infos, args=None):
        names.extend(info.name for info in infos)
        return await ORIGINAL(self, infos, args)

    jax_array_handlers.ArrayHandler.deserialize = deserialize
    return names


def check(model, params, layout: str, path: str, loader: str) -> dict:
    save(layout, params, path)
    mesh = sharding.make_mesh(jax.device_count())
    abstract = model_lib.abstract_params(model, 8)
    shardings = sharding.tree_shardings(mesh, abstract, jax.device_count())
    reads = spy_reads()
    try:
        if loader == "trainer":
            loaded = pretrained.load(path, abstract, shardings)
        else:
            target = jax.tree.map(
                lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract, shardings
            )
            loaded = gm.ckpts.load_params(path, params=target, donate=False, text_only=True)
    except Exception as e:  # pylint: disable=broad-except
        return {"error": f"{type(e).__name__}: {str(e)[:300]}", "reads": reads}
    finally:
        jax_array_handlers.ArrayHandler.deserialize = ORIGINAL
    wrong = [
        jax.tree_util.keystr(p)
        for p, x, s in zip(
            *zip(*jax.tree_util.tree_leaves_with_path(loaded)), jax.tree.leaves(shardings)
        )
        if not x.sharding.is_equivalent_to(s, x.ndim)
    ]
    diff = max(
        jax.tree.leaves(jax.tree.map(lambda a, b: float(np.max(np.abs(np.asarray(a) - b))), loaded, params))
    )
    split = sum(1 for s in jax.tree.leaves(shardings) if s.spec != jax.sharding.PartitionSpec())
    return {
        "max_diff": diff,
        "wrong_shardings": wrong,
        "sharded_leaves": split,
        "same_tree": jax.tree.structure(loaded) == jax.tree.structure(params),
        "reads": reads,
    }


def main(directory: str) -> None:
    model, params = tiny_params()
    out = {}
    for layout in ("nested", "stacked", "vision"):
        for loader in ("trainer", "gemma"):
            path = os.path.join(directory, f"{layout}-{loader}")
            out[f"{layout}-{loader}"] = check(model, params, layout, path, loader)
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
