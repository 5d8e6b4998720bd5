"""Special-token partitioning: cut the text at special tokens before any BPE (llama.cpp tokenizer_st_partition).

Candidates are the control, unknown and user-defined tokens, longest UTF-8 text first (ties by id; llama.cpp's
sort leaves their order unspecified, which only matters for overlapping equal-length tokens). Each candidate in
turn cuts every remaining text fragment at all its non-overlapping occurrences, left to right. With special
parsing off, control and unknown tokens are skipped, so their text is tokenized as plain text, while user-defined
tokens (Qwen's <think>, <tool_call>, ...) are still matched: that is llama.cpp's (and Hugging Face's) behaviour.
"""
from .token_attrs import CONTROL, UNKNOWN, USER_DEFINED


class SpecialTokenSplitter:
    def __init__(self, tokens: list, attrs: list):
        found = [(text, tid, bool(attrs[tid] & (CONTROL | UNKNOWN)))
                 for tid, text in enumerate(tokens) if attrs[tid] & (CONTROL | UNKNOWN | USER_DEFINED)]
        found.sort(key=lambda e: (-len(e[0].encode("utf-8")), e[1]))
        self.entries = found

    def split(self, text: str, parse_special: bool) -> list:
        """Fragments in order: str for raw text, int for a special token id. No empty strings."""
        if not text:
            return []
        fragments = [text]
        for special, tid, control in self.entries:
            if control and not parse_special:
                continue
            if not any(type(f) is str and special in f for f in fragments):
                continue
            cut = []
            for f in fragments:
                if type(f) is not str or special not in f:
                    cut.append(f)
                    continue
                for i, part in enumerate(f.split(special)):
                    if i:
                        cut.append(tid)
                    if part:
                        cut.append(part)
            fragments = cut
        return fragments
