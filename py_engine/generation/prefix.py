"""Reusing the backend's state across turns: how much of the cached sequence the new prompt can keep.

A chat turn's prompt usually starts with the previous turn's prompt and answer, so only the new tail needs a
prefill. Where the new prompt diverges from what is cached (an edited message, a re-tokenised answer, old reasoning
dropped by the template), a backend that supports_truncate drops the cached tail; a recurrent one cannot un-fold
tokens from its state: it goes back to the longest copy of its state it kept at or before the shared prefix
(checkpoints, taken at the turn boundaries checkpoint_positions names), or starts over.

Where a follow-up diverges: the template renders the last answer without its empty think block, so the next prompt
leaves the cached tokens right after the answer's header; an edited or regenerated last message leaves them at or
inside the last user message. So the checkpoints go at the start of the last two turns of each prompt.
"""
CHECKPOINTS_PER_PROMPT = 2


def common_prefix(a, b) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def reuse_limit(cached, prompt) -> int:
    """The most cached tokens a prompt can keep: the shared prefix, but at least the last prompt token is prefilled
    again (its logits are what the first answer token is sampled from, and a backend only holds the logits of its
    last prefill)."""
    return min(common_prefix(cached, prompt), len(prompt) - 1)


def checkpoint_positions(prompt, turn_id, after: int) -> list:
    """Token counts, past `after`, at which to keep the state while this prompt is prefilled: the starts of its last
    CHECKPOINTS_PER_PROMPT turns (the token `turn_id` opens each turn; None: no checkpoints)."""
    if turn_id is None:
        return []
    starts = [i for i, t in enumerate(prompt) if t == turn_id and i > 0]
    return [i for i in starts[-CHECKPOINTS_PER_PROMPT:] if i > after]


def plan_reuse(cached, prompt, supports_truncate: bool):
    """(keep, reset): keep the first `keep` cached tokens (truncating the rest), or reset and prefill everything.

    At least the last prompt token is always prefilled again: its logits are what the first answer token is
    sampled from, and a backend only holds the logits of its last prefill."""
    if not prompt:
        raise ValueError("empty prompt")
    keep = reuse_limit(cached, prompt)
    if keep == len(cached) or supports_truncate:
        return keep, False
    return 0, True
