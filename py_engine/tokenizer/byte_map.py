"""GPT-2 byte-level alphabet: each byte 0..255 is written as one printable character in BPE vocabularies.

Printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves; the other 68 bytes (controls, space,
DEL, NBSP, soft hyphen) take U+0100, U+0101, ... in byte order. So a space is 'Ġ' (U+0120) and '\\n' is 'Ċ'.
Conversions go through str.translate with Latin-1 as the carrier, which keeps them at C speed.
"""


def _byte_chars() -> tuple:
    printable = set(range(0x21, 0x7F)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    chars, extra = [], 0
    for b in range(256):
        if b in printable:
            chars.append(chr(b))
        else:
            chars.append(chr(256 + extra))
            extra += 1
    return tuple(chars)


BYTE_TO_CHAR = _byte_chars()
CHAR_TO_BYTE = {c: b for b, c in enumerate(BYTE_TO_CHAR)}

# latin-1 character (one per byte) -> byte-level character, and back
_ENCODE_TABLE = {b: c for b, c in enumerate(BYTE_TO_CHAR)}
_DECODE_TABLE = {ord(c): b for b, c in enumerate(BYTE_TO_CHAR)}


def text_to_symbols(text: str) -> str:
    """UTF-8 bytes of `text`, each written as its byte-level character."""
    return text.encode("utf-8").decode("latin-1").translate(_ENCODE_TABLE)


def symbols_to_bytes(symbols: str):
    """Bytes spelled by byte-level characters, or None if some character is not in the alphabet."""
    try:
        return symbols.translate(_DECODE_TABLE).encode("latin-1")
    except UnicodeEncodeError:
        return None
