"""One run: data, model, resume, train, final save, checks, push, merge, evaluation and export."""

from __future__ import annotations

import json
import logging
import os
import sys

from accelerate.utils import DistributedType

from trainers import exit_codes
from trainers.sft_data import formats

from . import checkpoints, data, evaluation, export as export_lib, model as model_lib
from .args import ConfigError
from .checkpoints import GracefulStop
from .launch import record_exit_code
from .trainer import build_trainer

log = logging.getLogger(__name__)


def prepare_data(script_args, training_args, tokenizer):
    if script_args.data_mix:
        with training_args.main_process_first(local=False, desc="dataset preparation"):
            train_set, eval_set, eval_rows, _ = data.mixed_splits(
                script_args, training_args.seed, tokenizer, training_args.max_length, training_args.dataset_num_proc)
        log.info("train (mixed): %d examples, held out: %d", len(train_set), len(eval_set))
        return train_set, eval_set, eval_rows
    spec = formats.spec_of_flags(script_args)
    with training_args.main_process_first(local=False, desc="dataset preparation"):
        rows = data.load_rows(script_args.dataset_name, script_args.dataset_split)
        data.check_rows(rows, spec, script_args.dataset_name)
        train_rows, eval_rows = data.split_rows(
            rows, script_args.max_samples, script_args.eval_fraction, training_args.seed
        )
        num_proc = training_args.dataset_num_proc
        train_set = data.tokenize_split(train_rows, tokenizer, training_args.max_length, spec, num_proc)
        eval_set = data.tokenize_split(eval_rows, tokenizer, training_args.max_length, spec, num_proc)
    log.info("train: %d examples, held out: %d", len(train_set), len(eval_set))
    return train_set, eval_set, eval_rows


def resume_point(script_args, training_args) -> str | None:
    """The latest complete checkpoint, the same on every rank; leftovers of a
    cut-short save are removed first (by the main process, before the others look)."""
    if not script_args.resume:
        return None
    with training_args.main_process_first(local=False, desc="checkpoint lookup"):
        if training_args.process_index == 0:
            for path in checkpoints.remove_incomplete_checkpoints(training_args.output_dir):
                log.warning("removed incomplete checkpoint %s", path)
        latest = checkpoints.latest_complete_checkpoint(training_args.output_dir)
    if latest:
        log.info("resuming from %s", latest)
    return latest


def check_distributed(trainer) -> dict:
    """What accelerate actually set up. On machines without GPUs it falls back
    from FSDP to DDP or to independent processes without an error, so the
    requested mode is checked rather than trusted."""
    accelerator = trainer.accelerator
    info = {
        "distributed_type": str(accelerator.distributed_type.value),
        "num_processes": accelerator.num_processes,
        "mixed_precision": accelerator.mixed_precision,
    }
    fsdp_requested = os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true"
    if fsdp_requested and accelerator.distributed_type != DistributedType.FSDP:
        raise ConfigError(
            f"the accelerate config asks for FSDP, but accelerate set up {info['distributed_type']} "
            f"with {info['num_processes']} process(es) (FSDP needs GPUs)"
        )
    launched = int(os.environ.get("WORLD_SIZE", "1"))
    if launched != accelerator.num_processes:
        raise ConfigError(f"{launched} processes were launched but accelerate trains with {accelerator.num_processes}")
    if trainer.is_world_process_zero():
        os.makedirs(trainer.args.output_dir, exist_ok=True)
        with open(os.path.join(trainer.args.output_dir, "run_info.json"), "w") as f:
            json.dump(info, f, indent=2)
    log.info("distributed setup: %s", info)
    return info


def save_final(trainer, output_dir: str) -> None:
    # One plain adapter file, the LoRA tensors alone gathered under FSDP
    # (FinetuneTrainer.save_model); the Hub push, if any, comes later.
    trainer.save_model(output_dir, _internal_call=True)
    log.info("final adapter saved to %s", output_dir)


def merge_adapter(script_args, training_args) -> None:
    """Base model + adapter merged into plain weights, on the main process only
    (the FSDP processes are done by then; this needs host memory for the model)."""
    from peft import PeftModel

    base = model_lib.load_model(script_args.model_id, training_args.bf16, script_args.trust_remote, False,
                                script_args.model_revision)
    merged = PeftModel.from_pretrained(base, training_args.output_dir).merge_and_unload()
    target = os.path.join(training_args.output_dir, "merged")
    merged.save_pretrained(target)
    _tokenizer(script_args).save_pretrained(target)
    log.info("merged model saved to %s", target)


def _tokenizer(script_args):
    return model_lib.load_tokenizer(
        script_args.model_id, script_args.trust_remote, script_args.use_fast, script_args.chat_template,
        script_args.model_revision,
    )


def build(script_args, training_args, started: float | None = None):
    """Everything up to a ready trainer: token check, tokenizer, data, model."""
    model_lib.check_hub_token(script_args.model_id, training_args.push_to_hub)
    tokenizer = _tokenizer(script_args)
    # prepare_data's main_process_first has set up the process group, so
    # with fsdp_cpu_ram_efficient_loading transformers reads the weights on
    # rank 0 only (modeling_utils: is_fsdp_enabled() needs an initialized
    # group) and accelerate broadcasts them when it shards the model.
    train_set, eval_set, eval_rows = prepare_data(script_args, training_args, tokenizer)
    model = model_lib.load_model(
        script_args.model_id, training_args.bf16, script_args.trust_remote, training_args.use_liger_kernel,
        script_args.model_revision,
    )
    stopper = GracefulStop()
    trainer = build_trainer(model, tokenizer, script_args, training_args, train_set, eval_set, stopper, started)
    check_distributed(trainer)
    return trainer, stopper, eval_rows


def leave(code: int, trainer) -> int:
    """Return `code`, or, in a multi-process run, end the process with it now.

    Freeing the DDP/FSDP model frees the process group, whose destructor joins
    its gloo worker threads while holding the GIL; a worker still releasing
    the last collective's Python tensors needs the GIL, and the process hangs
    (seen with torch 2.13). Everything is saved and closed by this point, so a
    distributed run exits without running the destructors."""
    if trainer.accelerator.num_processes == 1:
        return code
    record_exit_code(code)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run(script_args, training_args, started: float | None = None) -> int:
    """The run; `started` is when the process started (for the progress record's restore time)."""
    trainer, stopper, eval_rows = build(script_args, training_args, started)
    trainer.train(resume_from_checkpoint=resume_point(script_args, training_args))
    if stopper.stopped:
        log.warning("stopped on request after saving checkpoint-%d", trainer.state.global_step)
        trainer.end()
        return leave(exit_codes.TERMINATED, trainer)
    save_final(trainer, training_args.output_dir)
    metrics = trainer.evaluate()
    log.info("held-out loss after training: %.4f", metrics["eval_loss"])
    evaluation.run_sql_check(
        trainer, trainer.processing_class, eval_rows, script_args.sql_check_samples, script_args.sql_check_max_new_tokens,
        data.eval_spec(script_args),
    )
    step = trainer.state.global_step
    evaluated = export_lib.evaluate(trainer, script_args, eval_rows, step) if script_args.export_dir else None
    if training_args.push_to_hub:
        trainer.push_to_hub(dataset_name=script_args.dataset_name)
    trainer.end()  # closes the metric writers and the process group
    if script_args.merge_adapter and training_args.process_index == 0:
        merge_adapter(script_args, training_args)
    if script_args.export_dir and training_args.process_index == 0:
        try:
            export_lib.export(script_args, training_args, step, evaluated)
        except export_lib.ExportFailed as err:
            log.error("export failed (the checkpoints are untouched; a restart exports again): %s", err)
            return leave(exit_codes.EXPORT_FAILED, trainer)
    return leave(exit_codes.OK, trainer)
