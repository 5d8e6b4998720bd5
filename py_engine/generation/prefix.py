"""Reusing the backend's state across turns: how much of the cached sequence the new prompt can keep.

A chat turn's prompt usually starts with the previous turn's prompt and answer, so only the new tail needs a
prefill. Where the new prompt diverges from what is cached (an edited message, a re-tokenised answer, old reasoning
dropped by the template), a backend that supports_truncate drops the cached tail; a recurrent one cannot un-fold
tokens from its state and starts over.
"""


def common_prefix(a, b) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def plan_reuse(cached, prompt, supports_truncate: bool):
    """(keep, reset): keep the first `keep` cached tokens (truncating the rest), or reset and prefill everything.

    At least the last prompt token is always prefilled again: its logits are what the first answer token is
    sampled from, and a backend only holds the logits of its last prefill."""
    if not prompt:
        raise ValueError("empty prompt")
    keep = min(common_prefix(cached, prompt), len(prompt) - 1)
    if keep == len(cached) or supports_truncate:
        return keep, False
    return 0, True
