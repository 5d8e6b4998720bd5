"""What the expert streamer (expert_streamer.py) works with: its error, its eviction policies by name, a load in
flight and a demand being served."""
import asyncio

from .hot_policy import HotPolicy
from .recency import LruPolicy


class PoolExhausted(RuntimeError):
    """Every slot of the expert pool is pinned: the demand cannot be served."""


def make_policy(name, half_life_tokens=16.0):
    if name == "lru":
        return LruPolicy()
    if name == "hot":
        return HotPolicy(half_life_tokens)
    raise ValueError(f"unknown eviction policy {name!r} (use 'lru' or 'hot')")


class Load:
    __slots__ = ("layer", "expert", "key", "slot", "generation", "prefetch", "task", "read")

    def __init__(self, layer, expert, key, slot, generation, prefetch, read):
        self.layer, self.expert, self.key, self.slot = layer, expert, key, slot
        self.generation, self.prefetch, self.task = generation, prefetch, None
        self.read = read  # future of the record's bytes, set by its read batch


class Demand:
    """One ensure() call: the distinct ids, the slots claimed so far and the loads to wait for."""

    def __init__(self, layer, ids, generation):
        self.layer, self.ids = layer, ids
        self.unique = list(dict.fromkeys(ids))
        self.reset(generation)

    def reset(self, generation):
        self.generation = generation
        self.slot_of, self.pinned, self.waits = {}, [], []

    @property
    def blocked(self):
        return len(self.slot_of) < len(self.unique)

    def result(self):
        return [self.slot_of[e] for e in self.ids]


def running_loop():
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # called from synchronous code under Pyodide's WebLoop, which is always set
        return asyncio.get_event_loop()


def nbytes_of(data):
    try:
        return memoryview(data).nbytes
    except TypeError:  # a JS typed array proxy under Pyodide
        return int(data.byteLength)


def retrieve_exception(task):
    # a failed prefetch nobody awaits must not log "exception was never retrieved"; its error is kept in last_error
    if not task.cancelled():
        task.exception()
