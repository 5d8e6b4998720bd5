"""Replay a routing trace through the engine's own ExpertStreamer with instant fake I/O.

Per token, for each layer l: `ensure(l, picks)` (await it), `release`, then, with look-ahead on, `prefetch(l + 1,
guesses)` and one turn of the event loop so the prefetch reads land before layer l + 1 is demanded (the GPU time of
layer l + 1's trunk, during which real reads would run). A guess is the true next-layer pick with probability
`accuracy`, else a random expert. I/O is instant, so the results measure the policies, not the disk: a demand miss
is a stall a real run would wait for; a late hit cannot happen unless a prefetch is still queued behind the
in-flight cap. Counters start after a warm-up that fills the pool.
"""
import asyncio
import random
from dataclasses import dataclass

from py_engine.residency import ExpertStreamer, StreamerTuning


class InstantReader:
    """Every record is the same zero buffer of the real record size: bytes_read counts real bytes, copies none."""

    def __init__(self, record_bytes):
        self._record = memoryview(bytes(record_bytes))

    async def read_record(self, layer, expert):
        return self._record


class NullUploader:
    def upload(self, slot, data):
        pass


@dataclass
class SimResult:
    arch: str
    policy: str
    pool_fraction: float
    slots: int
    accuracy: float
    tokens: int
    hit_rate: float
    late_hits_per_token: float
    stalls_per_token: float  # demand misses per token
    bytes_per_token: float
    prefetch_issued_per_token: float
    prefetch_used_fraction: float


def guesses_for(picks, experts, accuracy, rng):
    """Look-ahead guesses for the next layer: each true pick kept with prob `accuracy`, else a random expert."""
    out = []
    for e in picks:
        if rng.random() >= accuracy:
            e = rng.randrange(experts)
        if e not in out:
            out.append(e)
    return out


async def _replay(xs, arch, trace, accuracy, warmup, rng):
    L = arch.layers
    for t, row in enumerate(trace):
        if t == warmup:
            xs.counters.reset()
        for layer in range(L):
            slots = await xs.ensure(layer, row[layer])
            xs.release(set(slots))
            if accuracy > 0 and layer + 1 < L:
                xs.prefetch(layer + 1, guesses_for(row[layer + 1], arch.experts, accuracy, rng))
                await asyncio.sleep(0)
        xs.advance_token()


def simulate(arch, trace, pool_fraction, policy="lru", accuracy=0.0, half_life_tokens=16.0, warmup=None,
             max_inflight=16, seed=0):
    total = arch.layers * arch.experts
    slots = max(arch.top_k, round(pool_fraction * total))
    warmup = len(trace) // 5 if warmup is None else warmup
    if warmup >= len(trace):
        raise ValueError(f"warm-up of {warmup} tokens leaves nothing to measure in a {len(trace)}-token trace")
    xs = ExpertStreamer(layers=arch.layers, experts=arch.experts, slots=slots,
                        reader=InstantReader(arch.record_bytes), uploader=NullUploader(),
                        record_bytes=arch.record_bytes,
                        tuning=StreamerTuning(policy, half_life_tokens, max_inflight))
    asyncio.run(_replay(xs, arch, trace, accuracy, warmup, random.Random(seed)))
    st = xs.stats()
    n = st["tokens"]
    return SimResult(arch=arch.name, policy=policy, pool_fraction=pool_fraction, slots=slots, accuracy=accuracy,
                     tokens=n, hit_rate=st["hit_rate"], late_hits_per_token=st["late_hits"] / n,
                     stalls_per_token=st["misses"] / n, bytes_per_token=st["bytes_read"] / n,
                     prefetch_issued_per_token=st["prefetch_issued"] / n,
                     prefetch_used_fraction=st["prefetch_accuracy"])
