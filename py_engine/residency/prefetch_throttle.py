"""Prefetch throttled by its measured accuracy: guesses are read only as far as they have been paying.

A prefetch read that a demand later uses saves a stall; one evicted (or cleared) unused costs a record's worth of
read and upload bandwidth for nothing. When the miss path is bandwidth-bound, prefetching at accuracy a moves 1/a
bytes per useful byte, so below `target` the streamer starts only a share a/target of each layer's guesses (at
least `floor`, so the accuracy keeps being measured and the throttle opens again when guesses improve).

Accuracy is a moving average over the last ~`window` outcomes (used = 1, wasted = 0), starting from `prior`.
"""


class PrefetchThrottle:
    def __init__(self, target=0.5, window=64, floor=1, prior=1.0):
        if not 0 < target <= 1:
            raise ValueError(f"prefetch accuracy target must lie in (0, 1], got {target}")
        if window < 1 or floor < 0:
            raise ValueError(f"window must be >= 1 and floor >= 0, got {window}, {floor}")
        self.target, self.floor = target, floor
        self.alpha = 1.0 / window
        self.accuracy = prior
        self.used = self.wasted = 0

    def record(self, used: bool):
        """One prefetched expert's outcome: demanded (used) or evicted / cleared unused (wasted)."""
        if used:
            self.used += 1
        else:
            self.wasted += 1
        self.accuracy += self.alpha * ((1.0 if used else 0.0) - self.accuracy)

    def allow(self, n: int) -> int:
        """How many of `n` guesses (best first) to read now."""
        if n <= 0 or self.accuracy >= self.target:
            return max(0, n)
        return min(n, max(self.floor, int(n * self.accuracy / self.target)))

    def as_dict(self) -> dict:
        return {"accuracy": self.accuracy, "target": self.target, "used": self.used, "wasted": self.wasted}
