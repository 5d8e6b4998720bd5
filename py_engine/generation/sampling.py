"""Choosing the next token from the backend's top candidates: greedy, or seeded sampling with llama.cpp's samplers.

The chain and its semantics follow llama.cpp's default sampler chain (common/sampling.cpp), in its order:

    penalties -> top-k -> top-p -> min-p -> temperature -> draw

- penalties (llama_sampler_penalties): over the last `repeat_last_n` tokens of the sequence (prompt included, as
  llama-server feeds the prompt to its sampler; -1 = the whole sequence, 0 = off), a token seen c times gets
  logit / repeat_penalty if its logit is > 0, else logit * repeat_penalty, then logit -= c * frequency_penalty
  + presence_penalty.
- top-k keeps the k best (0 = off). top-p keeps the smallest prefix whose probability (softmax over what is left)
  reaches p (1 = off). min-p keeps tokens whose probability is >= min_p times the best one's, i.e.
  logit >= best + ln(min_p) (0 = off). Each keeps at least one token.
- temperature divides the logits after the filters (so top-p and min-p see temperature-1 probabilities, as in
  llama.cpp); temperature <= 0 means greedy: the best candidate after the penalties.
- the draw uses random.Random(seed): the same seed, parameters and logits give the same tokens.

The candidates are the backend's top-K (K <= 64), not the whole vocabulary. That is exact for top-k <= K, min-p
and greedy. Two approximations when the list is truncated: top-p normalises over the K candidates (llama.cpp
normalises over what top-k left, 40 by default, so with top_k in 1..K it is exact too), and a penalised candidate
whose logit falls below the K-th logit is dropped, since an unseen token outside the list might now outrank it.
"""
import math
import random
from dataclasses import dataclass

MAX_CANDIDATES = 1024


def _number(name, value, low=None, high=None, low_open=False):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or math.isinf(value):
        raise ValueError(f"sampling: {name} must be a finite number, got {value!r}")
    if low is not None and (value <= low if low_open else value < low):
        raise ValueError(f"sampling: {name} must be {'>' if low_open else '>='} {low}, got {value!r}")
    if high is not None and value > high:
        raise ValueError(f"sampling: {name} must be <= {high}, got {value!r}")
    return float(value)


def _integer(name, value, low, high=None):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"sampling: {name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        rng = f">= {low}" if high is None else f"in {low}..{high}"
        raise ValueError(f"sampling: {name} must be {rng}, got {value}")
    return value


@dataclass(frozen=True)
class SamplingParams:
    """Defaults are llama.cpp's (temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, no penalties)."""
    temperature: float = 0.8
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    repeat_last_n: int = 64
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    seed: object = None  # None: a fresh random seed (reported in the stats)
    candidates: int = 64  # how many top logits to ask the backend for

    def __post_init__(self):
        _number("temperature", self.temperature, 0.0)
        _integer("top_k", self.top_k, 0)
        _number("top_p", self.top_p, 0.0, 1.0, low_open=True)
        _number("min_p", self.min_p, 0.0, 1.0)
        _number("repeat_penalty", self.repeat_penalty, 0.0, low_open=True)
        _integer("repeat_last_n", self.repeat_last_n, -1)
        _number("frequency_penalty", self.frequency_penalty)
        _number("presence_penalty", self.presence_penalty)
        if self.seed is not None:
            _integer("seed", self.seed, 0, 2 ** 64 - 1)
        _integer("candidates", self.candidates, 1, MAX_CANDIDATES)

    @classmethod
    def greedy(cls, **overrides) -> "SamplingParams":
        return cls(temperature=0.0, **overrides)

    @property
    def is_greedy(self) -> bool:
        return self.temperature <= 0.0

    @property
    def has_penalties(self) -> bool:
        return self.repeat_last_n != 0 and (self.repeat_penalty != 1.0 or self.frequency_penalty != 0.0
                                            or self.presence_penalty != 0.0)

    @classmethod
    def from_dict(cls, options: dict) -> "SamplingParams":
        """From a plain dict (a chat request); unknown keys are an error, not silently ignored."""
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(f"sampling: unknown parameter(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        return cls(**options)


# --- the samplers, on (ids, logits) lists sorted by logit, highest first ---------------------------------------------
def _sorted(ids, logits):
    order = sorted(range(len(ids)), key=lambda i: (-logits[i], ids[i]))
    return [ids[i] for i in order], [logits[i] for i in order]


def apply_penalties(ids, logits, history, params: SamplingParams, complete: bool = True):
    """Penalise candidates seen in the last repeat_last_n tokens of `history`; returns re-sorted (ids, logits).

    complete: the candidates are the whole vocabulary. Otherwise a candidate pushed below the lowest original
    logit is dropped (a token outside the list may now beat it); at least the best one is kept."""
    if not params.has_penalties or not ids:
        return list(ids), list(logits)
    window = history if params.repeat_last_n == -1 else history[-params.repeat_last_n:]
    counts = {}
    for token in window:
        counts[token] = counts.get(token, 0) + 1
    floor = min(logits)
    out = []
    for token, logit in zip(ids, logits):
        c = counts.get(token, 0)
        if c:
            logit = logit / params.repeat_penalty if logit > 0 else logit * params.repeat_penalty
            logit -= c * params.frequency_penalty + params.presence_penalty
        out.append(logit)
    new_ids, new_logits = _sorted(list(ids), out)
    if not complete:
        keep = [i for i, v in enumerate(new_logits) if v >= floor] or [0]
        new_ids, new_logits = [new_ids[i] for i in keep], [new_logits[i] for i in keep]
    return new_ids, new_logits


def top_k_filter(ids, logits, k: int):
    if k <= 0 or k >= len(ids):
        return ids, logits
    return ids[:k], logits[:k]


def softmax(logits):
    if not logits:
        return []
    m = max(logits)
    e = [math.exp(v - m) for v in logits]
    s = sum(e)
    return [v / s for v in e]


def top_p_filter(ids, logits, p: float):
    if p >= 1.0:
        return ids, logits
    cum = 0.0
    for i, prob in enumerate(softmax(logits)):
        cum += prob
        if cum >= p:
            return ids[:i + 1], logits[:i + 1]
    return ids, logits


def min_p_filter(ids, logits, min_p: float):
    if min_p <= 0.0 or not logits:
        return ids, logits
    threshold = logits[0] + math.log(min_p)
    n = max(1, sum(1 for v in logits if v >= threshold))
    return ids[:n], logits[:n]


class Sampler:
    """Picks tokens for one generation; holds the seeded RNG so successive picks continue one random stream."""

    def __init__(self, params: SamplingParams):
        if not isinstance(params, SamplingParams):
            raise TypeError(f"sampling parameters must be a SamplingParams, got {type(params).__name__}")
        self.params = params
        self.seed = params.seed if params.seed is not None else random.SystemRandom().randrange(2 ** 32)
        self.rng = random.Random(self.seed)

    def candidates_needed(self, max_candidates: int) -> int:
        """How many top logits to fetch: 1 for plain greedy, else the configured width (capped by the backend)."""
        if self.params.is_greedy and not self.params.has_penalties:
            return 1
        return max(1, min(self.params.candidates, max_candidates))

    def pick(self, ids, logits, history=(), complete: bool = False) -> int:
        """The next token from candidates sorted highest first. history: the sequence so far (for penalties)."""
        if not ids or len(ids) != len(logits):
            raise ValueError(f"sampler: need matching, non-empty candidate lists (got {len(ids)} ids, "
                             f"{len(logits)} logits)")
        p = self.params
        ids, logits = apply_penalties(ids, logits, history, p, complete)
        if p.is_greedy:
            return int(ids[0])
        ids, logits = top_k_filter(ids, logits, p.top_k)
        ids, logits = top_p_filter(ids, logits, p.top_p)
        ids, logits = min_p_filter(ids, logits, p.min_p)
        probs = softmax([v / p.temperature for v in logits])
        r = self.rng.random()
        cum = 0.0
        for token, prob in zip(ids, probs):
            cum += prob
            if r < cum:
                return int(token)
        return int(ids[-1])  # r within rounding of 1.0
