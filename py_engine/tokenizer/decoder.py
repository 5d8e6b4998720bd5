"""Streaming detokenization: feed ids one at a time, get text only once its UTF-8 characters are complete.

A token can end in the middle of a character (byte tokens of an emoji, say); the incomplete tail waits in the
incremental decoder for the next piece. Python's incremental UTF-8 decoder replaces invalid bytes exactly as a
one-shot bytes.decode(errors='replace') does, so the concatenated output always equals Tokenizer.decode(ids).
"""
import codecs


class StreamDecoder:
    def __init__(self, tokenizer, special: bool = True):
        self._piece = tokenizer.token_to_piece
        self._special = special
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, token_id: int) -> str:
        """Text completed by this token ('' while a character is still incomplete)."""
        return self._utf8.decode(self._piece(token_id, self._special))

    def flush(self) -> str:
        """Whatever is left at the end (an incomplete character becomes U+FFFD)."""
        return self._utf8.decode(b"", final=True)

    def reset(self):
        self._utf8.reset()
