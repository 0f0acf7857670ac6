"""Builds everything a run needs: mesh, model, data pipelines, train state.

Kept apart from the step loop (trainer.py) so each piece stays small and the
order of the collective operations (same on every process) is easy to read.
"""

from __future__ import annotations

import dataclasses
import functools
import os

import jax
from jax.experimental import multihost_utils
import numpy as np

from trainers.gemma_jax import checkpointing
from trainers.gemma_jax import cli
from trainers.gemma_jax import data
from trainers.gemma_jax import examples
from trainers.gemma_jax import model as model_lib
from trainers.gemma_jax import pretrained as pretrained_lib
from trainers.gemma_jax import sharding
from trainers.gemma_jax import steps
from trainers.gemma_jax import token_shards
from trainers.sft_data import formats, records


def log(msg: str) -> None:
    """Progress lines from the first process only (one `kubectl logs` is
    enough to follow a multi-host run)."""
    if jax.process_index() == 0:
        print(msg, flush=True)


@dataclasses.dataclass
class Layout:
    """How devices and data are laid out for this run."""

    mesh: jax.sharding.Mesh
    fsdp: int
    data_shards: int
    rows_per_shard: int


def make_layout(cfg: cli.Config, devices=None, processes: int | None = None) -> Layout:
    """Validates the batch/device/shard arithmetic and builds the mesh, over
    the attached devices and processes unless given (the ahead-of-time
    compile, aot.py, passes a TPU topology's)."""
    devices = jax.devices() if devices is None else list(devices)
    n_proc, n_dev = processes or jax.process_count(), len(devices)
    shards = cfg.data_shards or n_proc
    if shards % n_proc:
        raise cli.ConfigError(
            f"--data_shards={shards}: must be a multiple of the {n_proc} processes"
        )
    if cfg.batch_size % shards or cfg.batch_size % n_dev:
        raise cli.ConfigError(
            f"--batch_size={cfg.batch_size}: must be a multiple of the {n_dev} "
            f"devices and of the {shards} data shards"
        )
    fsdp = sharding.fsdp_size(cfg.fsdp, devices)
    try:
        mesh = sharding.make_mesh(fsdp, devices)
    except ValueError as e:
        raise cli.ConfigError(str(e)) from None
    return Layout(mesh, fsdp, shards, cfg.batch_size // shards)


def _min_over_processes(value: int) -> int:
    if jax.process_count() == 1:
        return value
    values = multihost_utils.process_allgather(np.asarray([value], np.int64))
    return int(np.min(values))


@dataclasses.dataclass
class DataPlan:
    train: object  # grain.IterDataset of process-local batches
    eval: object
    total_steps: int
    eval_steps: int


def needs_loss_mask(cfg: cli.Config) -> bool:
    """Whether the run's format (any of its datasets') trains only some tokens (then every row carries
    `loss_mask`)."""
    return any(formats.trains_some_tokens(spec.format, cfg.loss_on) for spec in cli.data_specs(cfg))


def reads_records(cfg: cli.Config) -> bool:
    """Records of data files, rather than a text file of stories or token shards."""
    if cfg.data_mix:
        return True
    path = cfg.data_path
    stories = os.path.isfile(path) and path.endswith(".txt") or token_shards.is_token_dir(path)
    return cfg.data_format != "text" or not stories


def _mixed_rows(cfg: cli.Config, wanted: int) -> tuple[list, tuple, tuple[str, ...]]:
    """(rows, specs, names) of --data_mix: each dataset read and its first rows checked, then mixed by weight
    (data.mix_records: rows are (row number, record, dataset index))."""
    sources, read = cli.data_sources(cfg), []
    for source in sources:
        rows = records.read_records(source.path, wanted)
        if not rows:
            raise records.RecordsError(f"{source.path}: no records")
        try:
            formats.check_rows(source.spec, rows[: formats.FIRST_ROWS])
        except formats.FormatError as e:
            raise type(e)(f"{source.path} (format {source.spec.format}): {e}") from None
        read.append(rows)
    mixed = data.mix_records(read, [s.weight for s in sources])[:wanted]
    log(f"[data] --data_mix: {len(mixed)} records from " + ", ".join(
        f"{s.path} {sum(1 for r in mixed if r[2] == i)}" for i, s in enumerate(sources)))
    return mixed, tuple(s.spec for s in sources), tuple(s.path for s in sources)


def _read_records(cfg: cli.Config, layout: Layout, factory, local: range):
    """(train, eval) shards of this process from the records of data files, checked against the format."""
    wanted = cfg.eval_stories + cfg.datacount
    try:
        if cfg.data_mix:
            rows, spec, names = _mixed_rows(cfg, wanted)
            first = [rows[0]] if rows else []
        else:
            spec, names = formats.spec_of_flags(cfg), ()
            rows = records.read_records(cfg.data_path, wanted)
            formats.check_rows(spec, rows[: formats.FIRST_ROWS])
            first = [(1, rows[0])] if rows else []
        template = examples.template_factory(spec, cfg.chat_template)
        # a template that can't be masked fails here, on the first record, as itself
        data.tokenize_records(first, spec, factory, template, 0, names)
        kw = {"spec": spec, "tokenizer_factory": factory, "template_factory": template,
              "workers": cfg.data_workers, "masked": needs_loss_mask(cfg), "names": names}
        held_out = data.make_record_shards(rows[: cfg.eval_stories], 0, local, layout.data_shards, **kw)
        train = data.make_record_shards(rows[cfg.eval_stories:], cfg.eval_stories, local, layout.data_shards, **kw)
    except (records.RecordsError, formats.FormatError) as e:
        flag = "--chat_template" if isinstance(e, formats.TemplateProblem) else f"--data_format={cfg.data_format}"
        where = "--data_mix" if cfg.data_mix else f"--data_path={cfg.data_path} ({flag})"
        raise cli.ConfigError(f"{where}: {e}") from None
    train_count = max(0, len(rows) - cfg.eval_stories)
    if train_count < cfg.datacount:
        log(f"[data] {cfg.data_mix and '--data_mix' or cfg.data_path} has only {train_count} training records "
            f"(--datacount={cfg.datacount})")
    return train, held_out


def _read_shards(cfg: cli.Config, layout: Layout, factory, local: range):
    """(train, eval) shards of this process: tokenized here from the text file, or read from token shards."""
    if reads_records(cfg):
        return _read_records(cfg, layout, factory, local)
    wanted = cfg.eval_stories + cfg.datacount
    if token_shards.is_token_dir(cfg.data_path):
        try:
            source = token_shards.TokenStories(cfg.data_path)
            source.check_tokenizer(factory())
        except token_shards.TokenShardsError as e:
            raise cli.ConfigError(str(e)) from None
        total = min(source.count, wanted)
        train_count = max(0, total - cfg.eval_stories)
        held_out_count = total - train_count
        train = data.make_token_shards(source, cfg.eval_stories, train_count, local, layout.data_shards)
        held_out = data.make_token_shards(source, 0, held_out_count, local, layout.data_shards)
    else:
        stories = data.read_stories(cfg.data_path, wanted)
        texts, train_count = stories[cfg.eval_stories:], max(0, len(stories) - cfg.eval_stories)
        train = data.make_shards(texts, cfg.eval_stories, local, layout.data_shards, factory, cfg.data_workers)
        held_out = data.make_shards(stories[: cfg.eval_stories], 0, local, layout.data_shards, factory,
                                    cfg.data_workers)
    if train_count < cfg.datacount:
        log(f"[data] {cfg.data_path} has only {train_count} training stories (--datacount={cfg.datacount})")
    return train, held_out


def make_data(cfg: cli.Config, layout: Layout) -> DataPlan:
    """Reads, tokenizes (own shards only), and plans the number of steps.

    Every process must run the same number of steps, so the plan is the
    minimum over all shards of all processes.
    """
    factory = functools.partial(model_lib.load_tokenizer, cfg.model, cfg.tokenizer)
    local = sharding.local_shard_range(layout.data_shards)
    kw = {"maxlen": cfg.maxlen, "rows_per_shard": layout.rows_per_shard}
    train_shards, eval_shards = _read_shards(cfg, layout, factory, local)
    available = _min_over_processes(
        min(
            data.full_batches(s, epochs=cfg.epochs, seed=cfg.seed, shuffle=True, **kw)
            for s in train_shards
        )
    )
    eval_steps = _min_over_processes(min(data.full_batches(s, epochs=1, **kw) for s in eval_shards))
    if cfg.eval_batches:
        eval_steps = min(eval_steps, cfg.eval_batches)
    if available == 0:
        raise cli.ConfigError(
            f"--datacount={cfg.datacount}: not enough tokens for one batch of "
            f"{cfg.batch_size} x {cfg.maxlen} per data shard"
        )
    total = min(cfg.steps, available) if cfg.steps else available
    if cfg.steps > available:
        log(f"[data] only {available} steps of data for --steps={cfg.steps}")
    tokens = sum(s.num_tokens for s in train_shards)
    log(
        f"[data] {sum(len(s.tokens) for s in train_shards)} train / "
        f"{sum(len(s.tokens) for s in eval_shards)} held-out stories in this "
        f"process's shards {list(local)}, {tokens} tokens; {total} steps, "
        f"{eval_steps} eval batches"
    )
    return DataPlan(
        train=data.batches(train_shards, seed=cfg.seed, epochs=cfg.epochs, shuffle=True, **kw),
        eval=data.batches(eval_shards, seed=cfg.seed, epochs=1, shuffle=False, **kw),
        total_steps=total,
        eval_steps=eval_steps,
    )


@dataclasses.dataclass
class ModelParts:
    model: object
    tokenizer: object
    optimizer: object
    lora: bool
    abstract_state: object  # ShapeDtypeStructs carrying their shardings
    state_shardings: object
    frozen_shardings: object
    abstract_frozen: object


def make_model(cfg: cli.Config, layout: Layout) -> ModelParts:
    """Model, optimizer and the (sharded) shapes of everything trained."""
    tokenizer = model_lib.load_tokenizer(cfg.model, cfg.tokenizer)
    return model_parts(cfg, layout, tokenizer, tokenizer.vocab_size)


def model_parts(cfg: cli.Config, layout: Layout, tokenizer, vocab_size: int) -> ModelParts:
    """make_model's parts for a given vocabulary (the ahead-of-time compile
    builds them without reading a tokenizer: only `tiny` models use it)."""
    lora = cfg.lora_rank > 0
    model = model_lib.build_model(cfg.model, vocab_size, cfg.param_dtype, cfg.lora_rank)
    optimizer = steps.make_optimizer(cfg.learning_rate, cfg.warmup_steps)
    abs_params = model_lib.abstract_params(model, cfg.maxlen)
    abs_trainable, abs_frozen = model_lib.split_trainable(abs_params, lora)
    if lora and not jax.tree.leaves(abs_trainable):
        # A model class neither gm.nn.LoRA nor lora.Gemma4LoRA adapts.
        raise cli.ConfigError(
            f"--lora_rank={cfg.lora_rank}: no LoRA adapter fits --model={cfg.model}; "
            "use a full fine-tune (--lora_rank 0) with --fsdp"
        )
    abs_state = steps.abstract_state(
        model_lib.with_dtype(abs_trainable, cfg.master_dtype), optimizer
    )
    state_sh = sharding.tree_shardings(layout.mesh, abs_state, layout.fsdp)
    frozen_sh = sharding.tree_shardings(layout.mesh, abs_frozen, layout.fsdp)
    abs_state = jax.tree.map(
        lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abs_state, state_sh
    )
    return ModelParts(model, tokenizer, optimizer, lora, abs_state, state_sh, frozen_sh, abs_frozen)


def frozen_params(cfg: cli.Config, parts: ModelParts):
    """The frozen base of a LoRA run ({} for a full fine-tune)."""
    if not parts.lora:
        return {}
    if cfg.init_from_hf:
        return _load_hf(cfg, parts, parts.abstract_frozen, parts.frozen_shardings)
    if cfg.pretrained:
        return _load_pretrained(cfg, parts.abstract_frozen, parts.frozen_shardings)
    return model_lib.init_params(
        parts.model, cfg.maxlen, cfg.seed, parts.frozen_shardings, True, frozen_only=True
    )


def _load_pretrained(cfg: cli.Config, abstract, shardings):
    try:
        return model_lib.load_pretrained(cfg.pretrained, abstract, shardings)
    except pretrained_lib.Mismatch as e:
        raise cli.ConfigError(f"--pretrained={cfg.pretrained}: {e}") from None


def _load_hf(cfg: cli.Config, parts: ModelParts, abstract, shardings):
    try:
        return model_lib.load_hf(cfg.init_from_hf, parts.model, abstract, shardings)
    except (KeyError, ValueError) as e:
        raise cli.ConfigError(f"--init_from_hf={cfg.init_from_hf}: {e}") from None


def fresh_state(cfg: cli.Config, parts: ModelParts):
    """Step-0 state: pretrained (or random) params and a new optimizer."""
    params_sh = parts.state_shardings["params"]
    if cfg.init_from_hf and not parts.lora:
        log(f"[model] loading the Hugging Face checkpoint {cfg.init_from_hf}")
        base = model_lib.with_dtype(parts.abstract_state["params"], cfg.param_dtype)
        params = _load_hf(cfg, parts, base, params_sh)
    elif cfg.pretrained and not parts.lora:
        log(f"[model] loading {cfg.pretrained}")
        params = _load_pretrained(cfg, parts.abstract_state["params"], params_sh)
    else:
        params = model_lib.init_params(parts.model, cfg.maxlen, cfg.seed, params_sh, parts.lora)
    return steps.init_state(params, parts.optimizer, parts.state_shardings, cfg.master_dtype)


def run_meta(cfg: cli.Config, layout: Layout) -> dict:
    meta = {k: getattr(cfg, k) for k in checkpointing.RUN_KEYS if hasattr(cfg, k)}
    meta["data_shards"] = layout.data_shards
    meta["process_count"] = jax.process_count()
    # A LoRA checkpoint holds only adapters: this is the base they belong to.
    meta["base"] = (cfg.init_from_hf or cfg.pretrained) if cfg.lora_rank else None
    # Not compared on resume; export_hf reads them.
    meta["export"] = {"tokenizer": cfg.tokenizer, "init_from_hf": cfg.init_from_hf}
    return meta
