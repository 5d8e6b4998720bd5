"""One reply against llama.cpp's: equal ids up to the first step whose llama.cpp margin is under the tolerance.

A step whose top-1/top-2 margin is that small is a near tie that a correct engine may break either way; after it
the two replies continue from different tokens, so nothing later is comparable.
"""
from dataclasses import dataclass

STOP = "<end of generation>"


@dataclass
class Verdict:
    passed: bool
    checked: int  # steps compared and equal
    steps: int  # llama.cpp's steps in the refs
    cut_at: int = None  # the first step under the tolerance (comparison ends there), if any
    step: int = None  # where the replies part, on a failure
    expected: object = None  # an id or STOP
    got: object = None  # an id, STOP or what ended the reply early
    margin: float = None
    agree: int = 0  # leading steps equal to llama.cpp's, near ties included (for information)


def got_steps(token_ids, stop_reason) -> list:
    """The page's reply as steps: its ids, then STOP if it ended on an end-of-generation token."""
    return list(token_ids) + ([STOP] if stop_reason == "stop" else [])


def compare_reply(conv, token_ids, stop_reason, tolerance: float) -> Verdict:
    expected = list(conv.reply_ids) + ([STOP] if conv.reply_stop else [])
    got = got_steps(token_ids, stop_reason)
    agree = next((s for s, (a, b) in enumerate(zip(expected, got)) if a != b), min(len(expected), len(got)))
    for s, want in enumerate(expected):
        margin = conv.margins[s]
        if margin < tolerance:
            return Verdict(True, s, len(expected), cut_at=s, margin=margin, agree=agree)
        have = got[s] if s < len(got) else f"<reply ended: {stop_reason}>"
        if have != want:
            return Verdict(False, s, len(expected), step=s, expected=want, got=have, margin=margin)
    return Verdict(True, len(expected), len(expected), agree=agree)
