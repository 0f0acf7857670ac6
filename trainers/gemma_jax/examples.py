"""Records of any data format as token ids and a loss mask, with gemma's tokenizer.

A record becomes text parts, each trained or not (trainers/sft_data/
parts.py); a chat is rendered with a chat template as transformers
renders it (trainers/sft_data/chat.py). gemma's SentencePiece tokenizer
never turns the text of a control piece (`<bos>`, `<eos>`) into its id, so
a rendering is cut at every control piece of the vocabulary first, and
those map to their ids, as transformers' tokenizer treats its special
tokens (user-defined pieces, Gemma's turn markers, SentencePiece matches
in the text itself). Plain text is BOS + text + EOS, as a story is.

The mask holds 1 on each token the loss is taken on as a target (it is
predicted from the tokens before it), 0 elsewhere.
"""

from __future__ import annotations

import functools
import re
import threading

import grain
import numpy as np

from trainers.sft_data import chat, formats, parts

@functools.cache
def _specials(tokenizer) -> tuple[dict[str, int], re.Pattern | None]:
    sp = tokenizer._sp  # pylint: disable=protected-access  # gemma's SentencePieceProcessor
    # User-defined pieces (Gemma's turn markers) SentencePiece matches in text by itself; control pieces and
    # the unknown piece never, while transformers splits every special token (`<unk>` too) out of the text.
    pieces = {sp.IdToPiece(i): i for i in range(sp.GetPieceSize())
              if (sp.IsControl(i) or sp.IsUnknown(i)) and len(sp.IdToPiece(i)) > 1}
    if not pieces:
        return pieces, None
    return pieces, re.compile("|".join(re.escape(p) for p in sorted(pieces, key=len, reverse=True)))


def encode_rendered(tokenizer, text: str) -> list[int]:
    """Token ids of a template's rendering: special pieces by their ids, the text between them encoded."""
    pieces, pattern = _specials(tokenizer)
    ids, at = [], 0
    for match in pattern.finditer(text) if pattern else ():
        if match.start() > at:
            ids += tokenizer.encode(text[at:match.start()])
        ids.append(pieces[match.group()])
        at = match.end()
    if at < len(text):
        ids += tokenizer.encode(text[at:])
    return ids


def tokenize_example(example: parts.Example, tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """(int32 token ids, int8 loss mask) of one record's parts."""
    encode = functools.partial(encode_rendered, tokenizer) if example.chat else tokenizer.encode
    ids, trained = example.tokens(encode, int(tokenizer.special_tokens.BOS), int(tokenizer.special_tokens.EOS))
    return np.asarray(ids, np.int32), np.asarray(trained, np.int8)


# A grain worker calls one map from several threads: build the tokenizer and the template once.
_BUILD_LOCK = threading.Lock()


class TokenizeRecord(grain.transforms.Map):
    """(row number, record) -> {"tokens", "mask"}; builds its tokenizer and template lazily (once, in
    whichever thread asks first) so it can be shipped to grain worker processes. With several datasets
    (`spec` a tuple of specs, `names` theirs), an item is (row number, record, dataset index)."""

    def __init__(self, spec: formats.Spec | tuple[formats.Spec, ...], tokenizer_factory, template_factory,
                 names: tuple[str, ...] = ()):
        self._specs = spec if isinstance(spec, tuple) else (spec,)
        self._tokenizer_factory, self._template_factory, self._names = tokenizer_factory, template_factory, names
        self._built = None

    def _parts(self):
        if self._built is None:
            with _BUILD_LOCK:
                if self._built is None:
                    tokenizer = self._tokenizer_factory()
                    template = self._template_factory(tokenizer) if self._template_factory else None
                    self._built = (tokenizer, template)
        return self._built

    def map(self, item):
        row, record, source = item if len(item) == 3 else (*item, 0)
        tokenizer, template = self._parts()
        try:
            example = parts.example(self._specs[source], record, template.render if template else None, row)
        except formats.FormatError as err:
            if not self._names:
                raise
            raise type(err)(f"{self._names[source]}: {err}") from None
        tokens, mask = tokenize_example(example, tokenizer)
        return {"tokens": tokens, "mask": mask}


def template_factory(spec: formats.Spec | tuple[formats.Spec, ...], name: str | None):
    """How the run's chat template (a shipped name, a file or a model directory) is built for a
    tokenizer; None for text, whose records are never chats."""
    specs = spec if isinstance(spec, tuple) else (spec,)
    if all(s.format == "text" for s in specs) or name is None:
        return None

    def build(tokenizer) -> chat.ChatTemplate:
        pieces = tokenizer.tokens  # a control piece decodes to nothing; its piece is its text in a template
        return chat.ChatTemplate.named(name, pieces[int(tokenizer.special_tokens.BOS)],
                                       pieces[int(tokenizer.special_tokens.EOS)])

    return build
