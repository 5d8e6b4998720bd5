"""Least-recently-used eviction over pool slots, O(1) per operation.

An eviction policy sees only *evictable* slots: resident and unpinned. The streamer withdraws a slot while it is
pinned or loading and admits it again when the last pin is released (or its load completes), so the policy never
has to skip pinned slots when it picks a victim. The interface every policy offers:

    admit(slot, key, now)    slot holds `key` and may be evicted from now on
    withdraw(slot)           slot may not be evicted (pinned, evicted, cleared); a no-op if not admitted
    use(slot, key, now)      `key` (held by `slot`) was demanded at token `now`
    victim() -> slot | None  the slot to evict next, or None when nothing is evictable
    reset()                  forget everything (the streamer was cleared)

`now` is the streamer's token clock (advance_token); LRU needs no clock, the hot policy does.
"""
from collections import OrderedDict


class LruPolicy:
    """Evicts the slot admitted or used longest ago. An OrderedDict keeps slots from oldest to newest."""

    name = "lru"

    def __init__(self):
        self._order = OrderedDict()

    def admit(self, slot, key, now):
        self._order[slot] = None
        self._order.move_to_end(slot)

    def withdraw(self, slot):
        self._order.pop(slot, None)

    def use(self, slot, key, now):
        if slot in self._order:
            self._order.move_to_end(slot)

    def victim(self):
        for slot in self._order:
            return slot
        return None

    def reset(self):
        self._order.clear()

    def __len__(self):
        return len(self._order)
