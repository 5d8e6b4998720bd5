"""SentencePiece-style BPE over one pre-split piece of text, as llama.cpp runs it for `tokenizer.ggml.model = gemma4`.

The merge loop is the byte-level one (bpe.BytePairEncoder: rank order, leftmost first on equal ranks), but the
symbols are the text's own characters, not the GPT-2 byte alphabet: the vocabulary holds raw UTF-8 pieces with
'▁' (U+2581) for a space. What differs from byte-level BPE (llama.cpp src/llama-vocab.cpp,
llm_tokenizer_bpe_session::tokenize with byte_encode = false):

- a piece made only of newlines that is itself a token stays whole (Gemma 4's "\\n\\n" and "\\n\\n\\n" tokens),
  without merging; otherwise newlines merge like any character;
- a final symbol that is not a token falls back to one `<0xXX>` token per UTF-8 byte (bytes without such a
  token are dropped, as llama.cpp drops them).
"""
import re

from .bpe import BytePairEncoder

SPACE_MARK = "\u2581"  # '▁': how SentencePiece vocabularies write a space

_LINES = re.compile("[^\n]+|\n+")
_ESCAPE = str.maketrans({" ": SPACE_MARK})


def split_pieces(text: str) -> list:
    """llama.cpp's gemma4 pre-split: spaces written as '▁', then runs of newlines apart from everything else."""
    return _LINES.findall(text.translate(_ESCAPE))


class SentencePieceEncoder(BytePairEncoder):
    def __init__(self, token_to_id: dict, merges, cache_limit: int = 1 << 16):
        super().__init__(token_to_id, merges, cache_limit)
        self.byte_ids = [token_to_id.get(f"<0x{b:02X}>") for b in range(256)]

    def _encode_uncached(self, piece: str) -> list:
        if piece[0] == "\n":  # split_pieces keeps newline runs apart: the whole piece is newlines
            tid = self.token_to_id.get(piece)
            if tid is not None:
                return [tid]
        return self._ids(self._merge(piece))

    def _ids(self, pieces: list) -> list:
        token_to_id, byte_ids = self.token_to_id, self.byte_ids
        ids = []
        for piece in pieces:
            tid = token_to_id.get(piece)
            if tid is not None:
                ids.append(tid)
                continue
            ids.extend(byte_ids[b] for b in piece.encode("utf-8") if byte_ids[b] is not None)
        return ids
