"""Turning logits into what the command line prints: top-k log-probabilities and the greedy id (no numpy)."""
import heapq
import math


def argmax(logits) -> int:
    """Index of the largest logit, ties to the lower index."""
    best, bi = logits[0], 0
    for i, v in enumerate(logits):
        if v > best:
            best, bi = v, i
    return bi


def top_logprobs(logits, k: int) -> list:
    """[[id, logprob], ...] best first (ties to the lower id), log-softmax over the whole vocabulary in float64."""
    m = max(logits)
    lse = m + math.log(math.fsum(math.exp(v - m) for v in logits))
    best = heapq.nsmallest(k, range(len(logits)), key=lambda i: (-logits[i], i))
    return [[i, float(logits[i]) - lse] for i in best]
