"""The model's tokenizer (GGUF `tokenizer.ggml.model = gpt2`): text <-> token ids, bit-exact with llama.cpp.
(Gemma 4's `gemma4` tokenizer is the subclass in sentencepiece.py; from_gguf_metadata picks the right one.)

encode: special tokens cut the text first (special.py), each remaining fragment is split into words by the
pre-tokenizer (pretokenize.py), each word becomes byte-level symbols and then BPE tokens (bpe.py).
decode: the pieces (bytes) of the ids are joined and decoded as UTF-8, invalid sequences replaced by U+FFFD, like
llama.cpp's /detokenize. Pieces: control, unknown and user-defined tokens are their text as is (special=True,
llama.cpp's default for detokenize; with special=False control and unknown tokens give nothing), normal tokens are
their byte-level characters mapped back to bytes, byte tokens "<0xNN>" the byte NN, anything else nothing.
"""
from dataclasses import dataclass

from .bpe import BytePairEncoder
from .byte_map import CHAR_TO_BYTE, symbols_to_bytes
from .pretokenize import rules_for, split_words
from .special import SpecialTokenSplitter
from .token_attrs import BYTE, CONTROL, NORMAL, UNKNOWN, USER_DEFINED, derive_attrs

STOP_TEXTS = ("<|im_end|>", "<|endoftext|>")


@dataclass(frozen=True)
class SpecialIds:
    """The vocabulary's named special tokens (None: the model names none): beginning and end of sequence, padding,
    end of turn, end of message."""
    bos: int = None
    eos: int = None
    pad: int = None
    eot: int = None
    eom: int = None


def _metadata_args(metadata: dict) -> dict:
    """The constructor's arguments from GGUF key/values."""
    tokens = metadata.get("tokenizer.ggml.tokens")
    merges = metadata.get("tokenizer.ggml.merges")
    if tokens is None or merges is None:
        raise ValueError("GGUF metadata lacks tokenizer.ggml.tokens or tokenizer.ggml.merges")
    tokens = list(tokens)
    n = len(tokens)
    return dict(
        tokens=tokens, merges=merges,
        pre=metadata.get("tokenizer.ggml.pre") or "default",
        token_types=metadata.get("tokenizer.ggml.token_type"),
        special=SpecialIds(*(_opt_id(metadata, f"tokenizer.ggml.{name}_token_id", n)
                             for name in ("bos", "eos", "padding", "eot", "eom"))),
        add_bos=bool(metadata.get("tokenizer.ggml.add_bos_token", False)),
        chat_template=metadata.get("tokenizer.chat_template"),
    )


def _opt_id(metadata: dict, key: str, n_tokens: int):
    value = metadata.get(key)
    if value is None:
        return None
    value = int(value)
    return value if 0 <= value < n_tokens else None


class Tokenizer:
    def __init__(self, tokens, merges, pre: str, token_types=None, special: SpecialIds = SpecialIds(),
                 add_bos: bool = False, chat_template=None):
        tokens = [t if t else f"[EMPTY_{i}]" for i, t in enumerate(tokens)]  # llama.cpp's name for empty texts
        self.tokens = tokens
        self.token_to_id = token_to_id = self._token_ids(tokens)
        self.pre = pre
        end_ids = (special.eos, special.eot, special.eom)
        self.attrs, self.eog_ids = derive_attrs(tokens, token_types, token_to_id, end_ids)
        self._init_encoder(merges)
        self.specials = SpecialTokenSplitter(tokens, self.attrs)
        self.bos_id, self.eos_id, self.pad_id = special.bos, special.eos, special.pad
        self.add_bos = bool(add_bos)
        self.chat_template = chat_template
        self.stop_ids = self._stop_ids()
        self._pieces = {}

    @staticmethod
    def _token_ids(tokens: list) -> dict:
        token_to_id = {}
        for i, text in enumerate(tokens):
            if token_to_id.setdefault(text, i) != i:
                raise ValueError(f"duplicate token in vocabulary: {text!r} has ids {token_to_id[text]} and {i}")
        return token_to_id

    def _init_encoder(self, merges):
        self.rules = rules_for(self.pre)
        self.bpe = BytePairEncoder(self.token_to_id, merges)

    def _stop_ids(self) -> frozenset:
        stops = [self.eos_id] + [self.token_to_id.get(t) for t in STOP_TEXTS]
        return frozenset(i for i in stops if i is not None)

    @classmethod
    def from_gguf_metadata(cls, metadata: dict) -> "Tokenizer":
        """Build from GGUF key/values given as plain Python values (lists, ints, strings, bools).

        Byte-level BPE ('gpt2') gives a Tokenizer, Gemma 4's SentencePiece-style BPE ('gemma4') a
        SentencePieceTokenizer."""
        model = metadata.get("tokenizer.ggml.model")
        if model == "gemma4":
            from .sentencepiece import SentencePieceTokenizer  # it subclasses this class
            return SentencePieceTokenizer(**_metadata_args(metadata))
        if model != "gpt2":
            raise ValueError(f"unsupported tokenizer.ggml.model {model!r}: byte-level BPE ('gpt2') and Gemma 4's "
                             "SentencePiece-style BPE ('gemma4') are supported")
        return cls(**_metadata_args(metadata))

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def encode(self, text: str, parse_special: bool = True, add_special: bool = False) -> list:
        """Token ids of `text`. add_special prepends BOS when the model asks for it (Qwen's do not)."""
        ids = []
        if add_special and self.add_bos and self.bos_id is not None:
            ids.append(self.bos_id)
        words, encode_word = self._words, self.bpe.encode_word
        for fragment in self.specials.split(text, parse_special):
            if type(fragment) is int:
                ids.append(fragment)
                continue
            for word in words(fragment):
                ids.extend(encode_word(word))
        return ids

    def _words(self, fragment: str) -> list:
        """The pre-tokenized words of a fragment without special tokens."""
        return split_words(fragment, self.rules)

    def token_to_piece(self, token_id: int, special: bool = True) -> bytes:
        """The bytes token `token_id` stands for (llama_token_to_piece)."""
        if not 0 <= token_id < len(self.tokens):
            raise ValueError(f"token id {token_id} is outside the vocabulary (0..{len(self.tokens) - 1})")
        attr = self.attrs[token_id]
        if not special and attr & (CONTROL | UNKNOWN):
            return b""
        piece = self._pieces.get(token_id)
        if piece is None:
            piece = self._pieces[token_id] = self._piece(self.tokens[token_id], attr)
        return piece

    @staticmethod
    def _piece(text: str, attr: int) -> bytes:
        if attr & (CONTROL | UNKNOWN | USER_DEFINED):
            return text.encode("utf-8")
        if attr & NORMAL:
            data = symbols_to_bytes(text)
            if data is not None:
                return data
            # a character outside the byte alphabet: llama_decode_text writes a marker instead of the byte
            out = bytearray()
            for ch in text:
                if ch in CHAR_TO_BYTE:
                    out.append(CHAR_TO_BYTE[ch])
                else:
                    out += f"[UNK_BYTE_0x{ch.encode('utf-8').hex()}{text}]".encode("utf-8")
            return bytes(out)
        if attr & BYTE:  # "<0xNN>"
            return bytes([int(text[3:5], 16)])
        return b""

    def decode(self, ids, special: bool = True) -> str:
        """Text of `ids`: pieces joined, then decoded (invalid UTF-8 becomes U+FFFD)."""
        piece = self.token_to_piece
        return b"".join(piece(i, special) for i in ids).decode("utf-8", errors="replace")

    def token_text(self, token_id: int) -> str:
        return self.tokens[token_id]

    def is_stop(self, token_id: int) -> bool:
        return token_id in self.stop_ids
