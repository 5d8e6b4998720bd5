"""Split a streamed answer into its reasoning ('<think>...</think>') and the answer text, chunk by chunk.

Qwen3 opens the block itself ('<think>' as its first output); Qwen3.5 with thinking on gets '<think>\\n' in the
prompt, so its output starts inside the block. Gemma 4 writes its reasoning in a thought channel,
'<|channel>thought\\n...<channel|>', which it opens itself (thinking_tags gives each architecture's pair). The
tags may arrive split over several chunks, so a tail that could still become a tag is held back until the next
chunk decides. The newlines that the templates put around the tags ('<think>\\n' ... '\\n</think>\\n\\n') are
dropped, so neither part starts or ends with them.
"""
OPEN = "<think>"
CLOSE = "</think>"
THINKING = "thinking"
TEXT = "text"
# architectures whose reasoning is not in <think> tags: (opening tag, closing tag)
THINKING_TAGS = {"gemma4": ("<|channel>thought", "<channel|>")}


def thinking_tags(arch: str) -> tuple:
    """(opening tag, closing tag) of the reasoning block of a model architecture."""
    return THINKING_TAGS.get(arch, (OPEN, CLOSE))


def _partial_tag(s: str, tag: str) -> int:
    """Length of the longest tail of s that is a proper prefix of tag."""
    for k in range(min(len(s), len(tag) - 1), 0, -1):
        if s.endswith(tag[:k]):
            return k
    return 0


class ThinkingSplitter:
    def __init__(self, in_thinking: bool, tags: tuple = (OPEN, CLOSE)):
        self.open_tag, self.close_tag = tags
        self.state = THINKING if in_thinking else TEXT
        self._held = ""
        self._may_open = not in_thinking  # '<think>' only counts before any answer text
        self._skip_newlines = in_thinking

    def feed(self, chunk: str) -> list:
        """(kind, text) pieces ready to show, kind 'thinking' or 'text'."""
        out = []
        s = self._held + chunk
        self._held = ""
        open_tag, close_tag = self.open_tag, self.close_tag
        while s:
            if self._skip_newlines:
                s = s.lstrip("\n")
                if not s:
                    break
                self._skip_newlines = False
            if self.state == THINKING:
                idx = s.find(close_tag)
                if idx >= 0:
                    self._emit(out, THINKING, s[:idx].rstrip("\n"))
                    self.state, self._may_open, self._skip_newlines = TEXT, False, True
                    s = s[idx + len(close_tag):]
                    continue
                head = s[:len(s) - _partial_tag(s, close_tag)]
                shown = head.rstrip("\n")  # newlines just before '</think>' are not part of the reasoning
                self._emit(out, THINKING, shown)
                self._held = s[len(shown):]
                break
            if self._may_open:
                body = s.lstrip()
                if body.startswith(open_tag):
                    self.state, self._skip_newlines = THINKING, True
                    s = body[len(open_tag):]
                    continue
                if open_tag.startswith(body):  # only whitespace or the start of '<think>' so far
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


def prompt_opens_thinking(prompt_text: str, tags: tuple = (OPEN, CLOSE)) -> bool:
    """Whether the prompt ends inside an open reasoning block (Qwen3.5's '<think>\\n' generation prompt)."""
    return prompt_text.rfind(tags[0]) > prompt_text.rfind(tags[1])
