"""The "hot" eviction policy: evict the slot whose expert has the smallest decaying use count.

Each expert (a key, resident or not, so a returning expert keeps its history) has a count that gains 1 per demand
and halves every `half_life_tokens` tokens: count(now) = c * 2 ** (-(now - t) / h) for the value c stored at token t.

Lazy decay without touching every count each token: compare counts in the log domain,
    log2(count(now)) = log2(c) + t / h - now / h,
where the `now / h` term is the same for every expert. So `score = log2(c) + t / h` orders experts by their decayed
count at *any* later token and never changes until the expert is used again. Evictable slots sit in a min-heap of
(score, seq, slot); a use or withdrawal invalidates the slot's entry (lazy deletion: entries whose seq is no longer
the slot's live seq are skipped), so every operation is O(log n). Ties go to the older entry (LRU order).

Same interface as recency.LruPolicy (see there).
"""
import heapq
import math


class HotPolicy:
    name = "hot"

    def __init__(self, half_life_tokens=16.0):
        if not half_life_tokens > 0:
            raise ValueError(f"half_life_tokens must be > 0, got {half_life_tokens!r}")
        self.half_life_tokens = float(half_life_tokens)
        self._score = {}  # key -> log2(count) + t/h at its last use
        self._heap = []  # (score, seq, slot); stale when seq != self._live.get(slot)
        self._live = {}  # evictable slot -> seq of its valid heap entry
        self._key_of = {}  # evictable slot -> key
        self._seq = 0

    def count(self, key, now):
        """The decayed use count of `key` at token `now` (0 for an expert never used)."""
        s = self._score.get(key)
        return 0.0 if s is None else 2.0 ** (s - now / self.half_life_tokens)

    def _push(self, slot, key):
        self._seq += 1
        self._live[slot] = self._seq
        self._key_of[slot] = key
        heapq.heappush(self._heap, (self._score.get(key, -math.inf), self._seq, slot))
        if len(self._heap) > 4 * len(self._live) + 64:
            self._compact()

    def _compact(self):
        self._heap = [e for e in self._heap if self._live.get(e[2]) == e[1]]
        heapq.heapify(self._heap)

    def admit(self, slot, key, now):
        self._push(slot, key)

    def withdraw(self, slot):
        if self._live.pop(slot, None) is not None:
            del self._key_of[slot]

    def use(self, slot, key, now):
        self._score[key] = math.log2(self.count(key, now) + 1.0) + now / self.half_life_tokens
        if slot in self._live:
            self._push(slot, key)

    def victim(self):
        heap = self._heap
        while heap:
            _, seq, slot = heap[0]
            if self._live.get(slot) == seq:
                return slot
            heapq.heappop(heap)
        return None

    def reset(self):
        self._score.clear()
        self._heap.clear()
        self._live.clear()
        self._key_of.clear()

    def __len__(self):
        return len(self._live)
