"""Character classes of llama.cpp's pre-tokenizer scanners, from `unicodedata` plus llama.cpp's own table.

The qwen2/qwen35 scanners (llama.cpp src/unicode.cpp, unicode_regex_split_custom_qwen2/_qwen35) only ask, per code
point: letter (\\p{L}), number (\\p{N}), combining mark (\\p{M}), whitespace (\\s), or anything else. Each code
point gets one class character so a whole text is classified with one str.translate call:

    'L' letter   'N' number   'M' mark   'S' the space U+0020   'R' '\\r' or '\\n'   'W' other whitespace
    'P' anything else (punctuation, symbols, controls, unassigned)

Whitespace is llama.cpp's set (the Unicode White_Space property: no U+001C..U+001F, unlike str.isspace).
llama.cpp classifies with tables generated from Unicode 15.1 (src/unicode-data.cpp), Python from its own UCD
version (14.0 in CPython 3.11, 16.0 in Pyodide's 3.14). LLAMA_OVERRIDES lists every code point where either of
those two versions disagrees with llama.cpp's table, with llama.cpp's class, so both runtimes split like llama.cpp.
(Derived by comparing the flag ranges of llama.cpp's unicode-data.cpp with unicodedata 14.0.0 and 16.0.0.)
"""
import unicodedata
from bisect import bisect_right

WHITESPACE = frozenset([0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
                        0x2028, 0x2029, 0x202F, 0x205F, 0x3000])

# (first, last, class) where Python's UCD 14.0 or 16.0 differs from llama.cpp's Unicode 15.1 table
LLAMA_OVERRIDES = (
    (0x00897, 0x00897, 'P'),
    (0x00CF3, 0x00CF3, 'M'),
    (0x00ECE, 0x00ECE, 'M'),
    (0x01C89, 0x01C8A, 'P'),
    (0x0A7CB, 0x0A7CD, 'P'),
    (0x0A7DA, 0x0A7DC, 'P'),
    (0x105C0, 0x105F3, 'P'),
    (0x10D40, 0x10D65, 'P'),
    (0x10D69, 0x10D6D, 'P'),
    (0x10D6F, 0x10D85, 'P'),
    (0x10EC2, 0x10EC4, 'P'),
    (0x10EFC, 0x10EFC, 'P'),
    (0x10EFD, 0x10EFF, 'M'),
    (0x1123F, 0x11240, 'L'),
    (0x11241, 0x11241, 'M'),
    (0x11380, 0x11389, 'P'),
    (0x1138B, 0x1138B, 'P'),
    (0x1138E, 0x1138E, 'P'),
    (0x11390, 0x113B5, 'P'),
    (0x113B7, 0x113C0, 'P'),
    (0x113C2, 0x113C2, 'P'),
    (0x113C5, 0x113C5, 'P'),
    (0x113C7, 0x113CA, 'P'),
    (0x113CC, 0x113D3, 'P'),
    (0x113E1, 0x113E2, 'P'),
    (0x116D0, 0x116E3, 'P'),
    (0x11BC0, 0x11BE0, 'P'),
    (0x11BF0, 0x11BF9, 'P'),
    (0x11F00, 0x11F01, 'M'),
    (0x11F02, 0x11F02, 'L'),
    (0x11F03, 0x11F03, 'M'),
    (0x11F04, 0x11F10, 'L'),
    (0x11F12, 0x11F33, 'L'),
    (0x11F34, 0x11F3A, 'M'),
    (0x11F3E, 0x11F42, 'M'),
    (0x11F50, 0x11F59, 'N'),
    (0x11F5A, 0x11F5A, 'P'),
    (0x1342F, 0x1342F, 'L'),
    (0x13440, 0x13440, 'M'),
    (0x13441, 0x13446, 'L'),
    (0x13447, 0x13455, 'M'),
    (0x13460, 0x143FA, 'P'),
    (0x16100, 0x16139, 'P'),
    (0x16D40, 0x16D6C, 'P'),
    (0x16D70, 0x16D79, 'P'),
    (0x18CFF, 0x18CFF, 'P'),
    (0x1B132, 0x1B132, 'L'),
    (0x1B155, 0x1B155, 'L'),
    (0x1CCF0, 0x1CCF9, 'P'),
    (0x1D2C0, 0x1D2D3, 'N'),
    (0x1DF25, 0x1DF2A, 'L'),
    (0x1E030, 0x1E06D, 'L'),
    (0x1E08F, 0x1E08F, 'M'),
    (0x1E4D0, 0x1E4EB, 'L'),
    (0x1E4EC, 0x1E4EF, 'M'),
    (0x1E4F0, 0x1E4F9, 'N'),
    (0x1E5D0, 0x1E5FA, 'P'),
    (0x2B739, 0x2B739, 'L'),
    (0x2EBF0, 0x2EE5D, 'L'),
    (0x31350, 0x323AF, 'L'),
)
_OVERRIDE_STARTS = [first for first, _, _ in LLAMA_OVERRIDES]

_CATEGORY_CLASS = {"L": "L", "N": "N", "M": "M"}


def classify_codepoint(cp: int) -> str:
    if cp in WHITESPACE:
        return "S" if cp == 0x20 else "R" if cp in (0x0A, 0x0D) else "W"
    i = bisect_right(_OVERRIDE_STARTS, cp) - 1
    if i >= 0 and cp <= LLAMA_OVERRIDES[i][1]:
        return LLAMA_OVERRIDES[i][2]
    return _CATEGORY_CLASS.get(unicodedata.category(chr(cp))[0], "P")


class _ClassTable(dict):
    """str.translate table: code point -> class character, filled on first sight of each code point."""

    def __missing__(self, cp):
        cls = self[cp] = classify_codepoint(cp)
        return cls


CLASS_TABLE = _ClassTable((cp, classify_codepoint(cp)) for cp in range(128))


def classify(text: str) -> str:
    """One class character per code point of `text`."""
    return text.translate(CLASS_TABLE)
