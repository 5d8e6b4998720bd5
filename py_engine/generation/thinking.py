"""Split a streamed answer into its reasoning ('<think>...</think>') and the answer text, chunk by chunk.

Qwen3 opens the block itself ('<think>' as its first output); Qwen3.5 with thinking on gets '<think>\\n' in the
prompt, so its output starts inside the block. The tags may arrive split over several chunks, so a tail that could
still become a tag is held back until the next chunk decides. The newlines that the templates put around the tags
('<think>\\n' ... '\\n</think>\\n\\n') are dropped, so neither part starts or ends with them.
"""
OPEN = "<think>"
CLOSE = "</think>"
THINKING = "thinking"
TEXT = "text"


def _partial_tag(s: str, tag: str) -> int:
    """Length of the longest tail of s that is a proper prefix of tag."""
    for k in range(min(len(s), len(tag) - 1), 0, -1):
        if s.endswith(tag[:k]):
            return k
    return 0


class ThinkingSplitter:
    def __init__(self, in_thinking: bool):
        self.state = THINKING if in_thinking else TEXT
        self._held = ""
        self._may_open = not in_thinking  # '<think>' only counts before any answer text
        self._skip_newlines = in_thinking

    def feed(self, chunk: str) -> list:
        """(kind, text) pieces ready to show, kind 'thinking' or 'text'."""
        out = []
        s = self._held + chunk
        self._held = ""
        while s:
            if self._skip_newlines:
                s = s.lstrip("\n")
                if not s:
                    break
                self._skip_newlines = False
            if self.state == THINKING:
                idx = s.find(CLOSE)
                if idx >= 0:
                    self._emit(out, THINKING, s[:idx].rstrip("\n"))
                    self.state, self._may_open, self._skip_newlines = TEXT, False, True
                    s = s[idx + len(CLOSE):]
                    continue
                head = s[:len(s) - _partial_tag(s, CLOSE)]
                shown = head.rstrip("\n")  # newlines just before '</think>' are not part of the reasoning
                self._emit(out, THINKING, shown)
                self._held = s[len(shown):]
                break
            if self._may_open:
                body = s.lstrip()
                if body.startswith(OPEN):
                    self.state, self._skip_newlines = THINKING, True
                    s = body[len(OPEN):]
                    continue
                if OPEN.startswith(body):  # only whitespace or the start of '<think>' so far
                    self._held = s
                    break
                self._may_open = False
            self._emit(out, TEXT, s)
            break
        return out

    def flush(self) -> list:
        """Whatever is held back, at the end of the stream."""
        out = []
        held, self._held = self._held, ""
        if self.state == THINKING:
            held = held.rstrip("\n")
        self._emit(out, self.state, held)
        return out

    @staticmethod
    def _emit(out, kind, text):
        if text:
            out.append((kind, text))


def prompt_opens_thinking(prompt_text: str) -> bool:
    """Whether the prompt ends inside an open reasoning block (Qwen3.5's '<think>\\n' generation prompt)."""
    return prompt_text.rfind(OPEN) > prompt_text.rfind(CLOSE)
