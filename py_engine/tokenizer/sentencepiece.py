"""Gemma 4's tokenizer (GGUF `tokenizer.ggml.model = gemma4`): SentencePiece-style BPE, bit-exact with llama.cpp.

What llama.cpp's vocabulary loader does for this model (src/llama-vocab.cpp), and so does this class:
- the pre-tokenizer is always 'gemma4' (llama.cpp ignores `tokenizer.ggml.pre` for it): spaces become '▁',
  the text splits into runs of newlines and runs of everything else, BPE merges raw characters (spm_bpe.py);
- BOS is always added when special tokens are added (llama.cpp overrides `add_bos_token = false`);
- pieces: normal tokens are their text with '▁' written back as a space, byte tokens `<0xNN>` the byte NN;
  control, unknown and user-defined tokens their text, as for byte-level BPE;
- generation stops at every end-of-generation token llama.cpp marks: `<eos>`, `<turn|>`, `<|tool_response>`.

Special tokens, their attributes and the special-token split are shared with the byte-level tokenizer.
"""
from .spm_bpe import SPACE_MARK, SentencePieceEncoder, split_pieces
from .token_attrs import BYTE, CONTROL, NORMAL, UNKNOWN, USER_DEFINED
from .tokenizer import Tokenizer

PRE_TOKENIZER = "gemma4"


class SentencePieceTokenizer(Tokenizer):
    def __init__(self, tokens, merges, pre: str = PRE_TOKENIZER, **options):
        options["add_bos"] = True  # llama.cpp forces it for this pre-tokenizer, whatever the file says
        super().__init__(tokens, merges, PRE_TOKENIZER, **options)

    @staticmethod
    def _token_ids(tokens: list) -> dict:
        # Gemma vocabularies have held a few repeated texts: the later id wins, as in llama.cpp's older map
        # (newer llama.cpp refuses such a file; both agree on every vocabulary without repeats)
        return {text: i for i, text in enumerate(tokens)}

    def _init_encoder(self, merges):
        self.rules = None
        self.bpe = SentencePieceEncoder(self.token_to_id, merges)

    def _stop_ids(self) -> frozenset:
        return frozenset(self.eog_ids)

    def _words(self, fragment: str) -> list:
        return split_pieces(fragment)

    @staticmethod
    def _piece(text: str, attr: int) -> bytes:
        if attr & (CONTROL | UNKNOWN | USER_DEFINED):
            return text.encode("utf-8")
        if attr & NORMAL:
            return text.replace(SPACE_MARK, " ").encode("utf-8")
        if attr & BYTE:  # "<0xNN>"
            return bytes([int(text[3:5], 16)])
        return b""
