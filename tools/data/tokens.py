"""The model's real tokenizer for `make check-data`: each example's tokens and trained tokens as its trainer
makes them.

Both trainers tokenize a record's parts (trainers/sft_data/parts.py `Example.tokens`) with the model's
tokenizer, special tokens split out of the text and none added: the GPU trainer with transformers' fast
tokenizer, a wrapper of the `tokenizers` library's Tokenizer loaded from the model's tokenizer.json
(transformers/tokenization_utils_tokenizers.py), called with add_special_tokens=False
(trainers/trl_gpu/data.py `_ids`); the JAX trainer with gemma's SentencePiece model of the same
vocabulary, its special pieces cut out first (trainers/gemma_jax/examples.py `encode_rendered`), which
tokenizes as the Hugging Face tokenizer does (tests/gemma_jax/test_real_tokenizer.py); both compared with
this module in tests/trl_gpu/ and tests/gemma_jax/test_check_data_tokens.py. Here the
`tokenizers` library reads that tokenizer.json itself. A chat is rendered with the template its trainer
uses (trainers/sft_data/chat.py: jinja2's sandbox, as transformers renders chat templates).

Where the tokenizer comes from: `--tokenizer DIR` (a Hugging Face tokenizer or model directory), else
the local Hugging Face cache of the run's model (huggingface_hub/file_download.py `try_to_load_from_cache`:
refs/main's snapshot under constants.HF_HUB_CACHE, which is $HF_HUB_CACHE, else $HF_HOME/hub, else
~/.cache/huggingface/hub; nothing is downloaded).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from trainers.sft_data import chat, formats, parts

TOKENIZER_FILE = "tokenizer.json"


class TokenizerError(Exception):
    """A --tokenizer directory that holds no tokenizer this check can read."""


@dataclass(frozen=True)
class Tokens:
    """A loaded tokenizer, its BOS and EOS ids, and the run's chat template (None for plain text)."""

    tokenizer: object  # tokenizers.Tokenizer
    bos: int | None
    eos: int | None
    template: chat.ChatTemplate | None
    source: str  # where the tokenizer was found, for the report

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def example(self, spec: formats.Spec, read: formats.Record, row: int) -> parts.Example:
        """A record read by formats.read_record as its trainer's text parts (tool calls included)."""
        return parts.example_of_read(spec, read, self.template.render if self.template else None, row)

    def tokens(self, example: parts.Example) -> tuple[list[int], list[bool]]:
        return example.tokens(self.encode, self.bos, self.eos)

    def tokens_of_many(self, examples: list[parts.Example]) -> list[tuple[list[int], list[bool]]]:
        """`tokens` of each example, their parts encoded in one call (the library's batch encoding, in
        parallel threads of its own) rather than one call per part: the same ids, less time per row."""
        texts = list({text: None for e in examples for text, _ in e.parts})
        ids = dict(zip(texts, (e.ids for e in self.tokenizer.encode_batch(texts, add_special_tokens=False))))
        return [e.tokens(ids.__getitem__, self.bos, self.eos) for e in examples]

    def marked(self, ids: list[int], trained: list[bool]) -> list[tuple[str, bool]]:
        """The tokens decoded in runs of trained and untrained ones, special tokens shown."""
        out, start = [], 0
        for i in range(1, len(ids) + 1):
            if i == len(ids) or trained[i] != trained[start]:
                out.append((self.tokenizer.decode(ids[start:i], skip_special_tokens=False), trained[start]))
                start = i
        return out


def find(explicit: Path | None, hub_id: str | None) -> tuple[Path | None, str]:
    """(the directory of the tokenizer, where it was found) or (None, why there is none)."""
    if explicit is not None:
        if not (explicit / TOKENIZER_FILE).is_file():
            raise TokenizerError(f"--tokenizer {explicit}: no {TOKENIZER_FILE} there; expected a Hugging Face "
                                 "tokenizer or model directory (save_pretrained writes one)")
        return explicit, str(explicit)
    if not hub_id or "/" not in hub_id or Path(hub_id).is_absolute():
        return None, (f"the run's model {hub_id!r} names no Hugging Face Hub model" if hub_id else
                      "the run names no model of the Hugging Face Hub") + "; pass --tokenizer DIR"
    from huggingface_hub import try_to_load_from_cache  # pylint: disable=import-outside-toplevel

    found = try_to_load_from_cache(hub_id, TOKENIZER_FILE)
    if isinstance(found, str):
        return Path(found).parent, f"the Hugging Face cache ({hub_id})"
    return None, (f"{hub_id}'s {TOKENIZER_FILE} is not in the Hugging Face cache on this machine (nothing is "
                  "downloaded here: `hf download " f"{hub_id} {TOKENIZER_FILE} tokenizer_config.json`, or pass "
                  "--tokenizer DIR)")


def _special(directory: Path, tokenizer, key: str) -> int | None:
    """The id of tokenizer_config.json's `bos_token` / `eos_token` (a string, or {"content": ...})."""
    config = directory / "tokenizer_config.json"
    value = json.loads(config.read_text(encoding="utf-8")).get(key) if config.is_file() else None
    if isinstance(value, dict):
        value = value.get("content")
    return tokenizer.token_to_id(value) if isinstance(value, str) else None


def _template(directory: Path, name: str | None, bos: str, eos: str) -> chat.ChatTemplate:
    """The template a run names (a shipped one, a file, a model directory), else the tokenizer's own."""
    if name is None:
        source = chat.model_dir_template(directory)
        if source is None:
            raise chat.TemplateError(f"the tokenizer in {directory} has no chat template and the run names none "
                                     "(--chat_template): its trainer refuses a chat without one")
        return chat.ChatTemplate(source, bos, eos, name=str(directory))
    if name in chat.BUILT_IN or Path(name).exists():
        return chat.ChatTemplate.named(name, bos, eos)
    from trainers.exit_codes import ConfigError  # pylint: disable=import-outside-toplevel
    from trainers.trl_gpu import templates  # pylint: disable=import-outside-toplevel

    try:  # one of the templates TRL ships, where TRL is installed
        return chat.ChatTemplate(templates.resolve(name), bos, eos, name=name)
    except ConfigError:
        raise chat.TemplateError(f"--chat_template {name}: neither a shipped template "
                                 f"({', '.join(chat.BUILT_IN)}), a file here, nor TRL's (not installed here)") from None


def load(explicit: Path | None, hub_id: str | None, template: str | None,
         data_format: str) -> tuple[Tokens | None, str]:
    """The run's tokenizer and template, or (None, why the counts are in characters)."""
    directory, where = find(explicit, hub_id)
    if directory is None:
        return None, where
    from tokenizers import Tokenizer  # pylint: disable=import-outside-toplevel

    try:
        tokenizer = Tokenizer.from_file(str(directory / TOKENIZER_FILE))
    except Exception as err:  # the Rust library raises its own exception type for a malformed file
        raise TokenizerError(f"{directory / TOKENIZER_FILE}: not a tokenizer the `tokenizers` library reads "
                             f"({err})") from None
    bos, eos = _special(directory, tokenizer, "bos_token"), _special(directory, tokenizer, "eos_token")
    rendered = None
    if data_format != "text":
        try:
            rendered = _template(directory, template, tokenizer.id_to_token(bos) if bos is not None else "",
                                 tokenizer.id_to_token(eos) if eos is not None else "")
        except chat.TemplateError as err:
            return None, f"tokenizer {where}, but no chat template: {err}"
    return Tokens(tokenizer, bos, eos, rendered, where), where
