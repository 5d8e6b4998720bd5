"""Timings and counts of one generation (what the chat page shows under an answer)."""
from dataclasses import asdict, dataclass


def _rate(n, seconds):
    return n / seconds if n and seconds and seconds > 0 else None


@dataclass
class GenerationStats:
    prompt_tokens: int = 0  # tokens of the whole prompt
    reused_tokens: int = 0  # of those, already in the backend's state from the previous turn
    prefilled_tokens: int = 0  # of those, computed by this generation
    cache_reset: bool = False  # the state was discarded (a recurrent model whose prompt diverged)
    restored_checkpoint: int = None  # a recurrent model whose prompt diverged: tokens of the state it went back to
    generated_tokens: int = 0  # answer tokens (a final stop token not counted)
    decode_steps: int = 0  # tokens fed back one at a time
    prefill_seconds: float = 0.0  # from the first prefill to the first token's logits being read
    decode_seconds: float = 0.0  # from the first token to the last
    first_token_seconds: float = None  # from the call to the first token (prompt latency as the user feels it)
    total_seconds: float = 0.0
    seed: int = None

    @property
    def prefill_tokens_per_s(self):
        return _rate(self.prefilled_tokens, self.prefill_seconds)

    @property
    def decode_tokens_per_s(self):
        return _rate(self.decode_steps, self.decode_seconds)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["prefill_tokens_per_s"] = self.prefill_tokens_per_s
        d["decode_tokens_per_s"] = self.decode_tokens_per_s
        return d
