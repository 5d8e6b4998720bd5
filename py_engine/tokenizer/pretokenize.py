"""Pre-tokenizer: split text into words before BPE, exactly like llama.cpp's `qwen2` and `qwen35` scanners.

llama.cpp does not run the pre-tokenizer regex of these vocabularies; it runs hand-written scanners
(src/unicode.cpp: unicode_regex_split_custom_qwen2 / _qwen35) for

    qwen2:  (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\\r\\n\\p{L}\\p{N}]?\\p{L}+ | \\p{N} | ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*
            | \\s*[\\r\\n]+ | \\s+(?!\\S) | \\s+
    qwen35: the same, except that combining marks join letters: [^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+ and
            ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*  (so Thai and Arabic vowel signs stay inside their word)

This is the same scan, rule by rule, over the class string of char_classes (one character per code point), so the
runs inside a rule are matched by small regexes over that ASCII string instead of a Python loop per character.
Numbers are one digit per word. Contractions are matched on ASCII letters only, as llama.cpp's tolower makes no
other code point equal to s/t/m/d/r/e/v/l.
"""
import re
from itertools import product

from .char_classes import classify

_CONTRACTION_1 = frozenset("sStTmMdD")
_CONTRACTION_2 = frozenset("".join(p) for pair in ("re", "ve", "ll")
                           for p in product(*((ch, ch.upper()) for ch in pair)))
_NEWLINE_RUN = re.compile("R*").match
_SPACE_RUN = re.compile("[SRW]+").match


class _Rules:
    """What differs between the scanners: which classes form a word, which are 'other' (punctuation) runs."""

    def __init__(self, letters: str):
        self.letters = letters
        self.word_run = re.compile(f"[{letters}]*").match
        self.other = "".join(c for c in "PM" if c not in letters)
        self.other_run = re.compile(f"[{self.other}]+").match


PRE_TOKENIZERS = {
    "qwen2": _Rules("L"),
    "qwen35": _Rules("LM"),
}


def rules_for(pre: str) -> _Rules:
    try:
        return PRE_TOKENIZERS[pre]
    except KeyError:
        raise ValueError(f"unsupported pre-tokenizer {pre!r} (supported: {', '.join(PRE_TOKENIZERS)})") from None


def split_words(text: str, rules: _Rules) -> list:
    """The words of `text` (a fragment without special tokens), in order; ''.join(result) == text."""
    cls = classify(text)
    n = len(text)
    letters, other = rules.letters, rules.other
    word_run, other_run = rules.word_run, rules.other_run
    words = []
    append = words.append
    pos = 0
    while pos < n:
        c = cls[pos]
        # (?i:'s|'t|'re|'ve|'m|'ll|'d)
        if text[pos] == "'" and pos + 1 < n:
            if text[pos + 1] in _CONTRACTION_1:
                append(text[pos:pos + 2])
                pos += 2
                continue
            if pos + 2 < n and text[pos + 1:pos + 3] in _CONTRACTION_2:
                append(text[pos:pos + 3])
                pos += 3
                continue
        # [^\r\n\p{L}\p{N}]?\p{L}+   (qwen35: [\p{L}\p{M}]+)
        if c != "R" and c != "N" and (c in letters or (pos + 1 < n and cls[pos + 1] in letters)):
            end = word_run(cls, pos + 1).end()
            append(text[pos:end])
            pos = end
            continue
        # \p{N}: one digit at a time
        if c == "N":
            append(text[pos])
            pos += 1
            continue
        # ' ?[^\s\p{L}\p{N}]+[\r\n]*'
        if c == "S":
            if pos + 1 == n:  # a final space: llama.cpp takes it here, as a word of its own
                append(text[pos])
                pos += 1
                continue
            c2 = cls[pos + 1]
        else:
            c2 = c
        if c2 in other:
            start = pos
            end = other_run(cls, pos + 1 if c == "S" else pos).end()
            end = _NEWLINE_RUN(cls, end).end()
            append(text[start:end])
            pos = end
            continue
        # whitespace: \s*[\r\n]+ | \s+(?!\S) | \s+
        m = _SPACE_RUN(cls, pos)
        if m is None:  # unreachable: every class is handled above; kept as llama.cpp's single-character fallback
            append(text[pos])
            pos += 1
            continue
        end = m.end()
        last_newline = cls.rfind("R", pos, end)
        if last_newline >= 0:
            end = last_newline + 1
        elif end - pos > 1 and end < n:
            end -= 1
        append(text[pos:end])
        pos = end
    return words
