"""Loads a gemma params checkpoint straight into the run's shardings.

gemma's own `gm.ckpts.load_params` (gemma 4.0.1, gm/ckpts/_checkpoint.py)
has two problems for sharded training, both fixed here while reusing its
layout conversions:

- Stacked layout (`transformer/stacked_layers/attention_type_<i>/...`, one
  array per attention type holding every layer of that type): its target
  tree is built by `_compat.stack_params`, whose `old_shape_dtype.update(
  shape=(num_slices, *shape))` keeps one layer's sharding on the stacked
  array, so every sharded axis lands one axis too early (the layer axis gets
  the fsdp split; with fewer layers than devices the restore fails with an
  IndivisibleError). Here the
  stacked arrays are read with the layer spec shifted behind an unsharded
  layer axis, then split into layers by a jit whose outputs carry the wanted
  shardings.
- Text-only loading: `load_params(text_only=True)` adds the vision tower to
  the restore target (`_add_skip_mm_params`, replicated on every device)
  and deletes it afterwards; `_partial_restore` notes that orbax could not
  skip leaves then. Orbax 0.12 can (`PyTreeRestore(partial_restore=True)`:
  leaves absent from the target are marked `skip_deserialize`, see
  `_get_restore_parameters` in orbax's pytree_checkpoint_handler.py), so the
  target here is the text model's own tree and nothing else is read.
"""

from __future__ import annotations

import os

from etils import epath
from gemma.gm.ckpts import _checkpoint as gemma_ckpt
from gemma.gm.ckpts import _compat as gemma_compat
import jax
from jax.sharding import NamedSharding, PartitionSpec as P
import orbax.checkpoint as ocp

# Checkpoint subtrees a text-only model does not have (Gemma 3 4B+ and
# Gemma 4 vision/audio towers and their projections into the text embedding).
_MULTIMODAL = (
    "vision_encoder",
    "audio_encoder",
    "embedder/mm_",
    "embedder/audio_",
)


class Mismatch(ValueError):
    """The checkpoint's params are not the model's."""


def checkpoint_layout(path: str, multiprocessing_options=None):
    """(layout, metadata tree with ShapeDtypeStructs, item path)."""
    options = multiprocessing_options or ocp.options.MultiprocessingOptions()
    with ocp.StandardCheckpointer(multiprocessing_options=options) as ckptr:
        # Handles Kauldron checkpoints, whose params sit under `default/`.
        metadata, item_path = gemma_ckpt._get_metadata_and_path(ckptr, path)  # pylint: disable=protected-access
    tree = gemma_ckpt._CheckpointTree.shape_dtype_struct_like(metadata)  # pylint: disable=protected-access
    return tree.type, tree, item_path


def _stack_shardings(stacked_target):
    """Moves each stacked leaf's (one-layer) spec behind its layer axis."""

    def fix(key: str, leaf):
        if "stacked_layers/" not in key:
            return leaf
        sharding = leaf.sharding
        if isinstance(sharding, NamedSharding):
            sharding = NamedSharding(sharding.mesh, P(None, *sharding.spec))
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding)

    return {
        key: {name: fix(key, leaf) for name, leaf in sub.items()}
        if isinstance(sub, dict)
        else fix(key, sub)
        for key, sub in stacked_target.items()
    }


def _checkpoint_target(layout, ckpt_tree, nested_target):
    """The run's nested target, reshaped into the checkpoint's structure."""
    kinds = gemma_ckpt._CheckpointType  # pylint: disable=protected-access
    if layout == kinds.NESTED:
        return nested_target
    if layout == kinds.KAULDRON:
        return {"params": nested_target}
    flat = gemma_ckpt._nested_to_flat(nested_target)  # pylint: disable=protected-access
    if layout == kinds.FLAT:
        return flat
    pattern = gemma_compat.get_attention_pattern_len(ckpt_tree.tree)
    return _stack_shardings(gemma_compat.stack_params(flat, pattern))


def _names(tree) -> set[str]:
    return {
        "/".join(str(getattr(k, "key", k)) for k in path)
        for path, _ in jax.tree_util.tree_leaves_with_path(tree)
    }


def unexpected_leaves(ckpt_tree, nested_target) -> tuple[list[str], list[str]]:
    """(missing, extra) param names, multimodal extras excepted."""
    saved, wanted = _names(ckpt_tree.nested_tree), _names(nested_target)
    extra = [n for n in sorted(saved - wanted) if not n.startswith(_MULTIMODAL)]
    return sorted(wanted - saved), extra


def load(path: str, abstract_params, shardings, multiprocessing_options=None):
    """Params in the model's nested tree, with `abstract_params`' dtypes and
    `shardings`, read from a gemma checkpoint of any layout (nested, flat,
    stacked, Kauldron). Leaves the model lacks (vision/audio towers) are
    never read; any other difference raises Mismatch naming the leaves.

    `multiprocessing_options`: Orbax's (default: every process restores
    together); the export passes agree.lone_process_options()."""
    if "://" not in path:
        path = os.path.abspath(path)
    options = multiprocessing_options or ocp.options.MultiprocessingOptions()
    layout, ckpt_tree, item_path = checkpoint_layout(epath.Path(path), options)
    nested_target = jax.tree.map(
        lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract_params, shardings
    )
    missing, extra = unexpected_leaves(ckpt_tree, nested_target)
    if missing or extra:
        raise Mismatch(
            f"{path} does not match the model: missing {missing[:5]}, unexpected {extra[:5]}"
        )
    target = _checkpoint_target(layout, ckpt_tree, nested_target)
    # ocp.PyTreeCheckpointer with the given multiprocessing options (it takes
    # only primary_host: orbax/checkpoint/_src/checkpointers/pytree_checkpointer.py).
    handler = ocp.PyTreeCheckpointHandler(multiprocessing_options=options)
    with ocp.Checkpointer(handler, multiprocessing_options=options) as ckptr:
        restored = ckptr.restore(
            item_path,
            args=ocp.args.PyTreeRestore(
                item=target,
                restore_args=ocp.checkpoint_utils.construct_restore_args(target),
                partial_restore=True,
            ),
        )

    def to_nested(tree):
        return gemma_ckpt._CheckpointTree(tree=tree).nested_tree  # pylint: disable=protected-access

    if layout == gemma_ckpt._CheckpointType.STACKED:  # pylint: disable=protected-access
        # Splitting the layers inside a jit lets its outputs carry the wanted
        # shardings (eager slicing would keep whatever XLA propagates).
        return jax.jit(to_nested, out_shardings=shardings)(restored)
    return to_nested(restored)
