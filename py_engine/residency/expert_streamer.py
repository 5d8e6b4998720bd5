"""The expert streamer: a fixed pool of GPU slots that routed experts are paged into from storage.

It decides which expert lives in which slot; bytes move through two objects it is given:

    reader    `async read_record(layer, expert) -> bytes-like`  one expert record (an OPFS reader pool in the
              browser; a file or a fake in tests). Its length must be `record_bytes` when that is given.
              Optionally `async read_records(layer, experts) -> [bytes-like]`: several records of one layer in one
              call, read in parallel (one await for the batch instead of one per record).
    uploader  `upload(slot, data)`  puts a record into a slot (a ring of mapped MAP_WRITE staging buffers +
              copyBufferToBuffer, or writeBuffer). May return an awaitable, which is awaited.
    on_map_change(layer, expert, slot_or_-1)  optional hook, called when an expert's upload has been submitted
              (slot) and when it is evicted or cleared (-1); ResidencyMap.set fits it.

Rules (tests/unit/test_residency*.py check each):
- `ensure(layer, ids)` claims at once, before it returns, and gives an awaitable of the slots in the order of `ids`
  (a duplicate id gets the same slot). Each distinct expert is pinned once; the caller calls `release(slots)` with
  the distinct slots (`set(result)`) after submitting the work that reads them. A resident expert is a hit (recency
  refreshed); one still loading (a prefetch in flight) is a late hit: no second read, the demand awaits that load;
  anything else is a miss, read and uploaded now. Because the claims happen at call time, the engine can call
  `prefetch` for the next layers right after `ensure` and before awaiting it, and the demand reads start first.
- A pinned slot is never evicted. When every slot is pinned a demand raises PoolExhausted (from the ensure() call
  itself, having released what it pinned); when the only unpinned slots are still loading, the demand waits for
  one of those loads and evicts it. A failed or cancelled demand releases its pins; a failed read raises from it.
- `touch(layer, ids)`: experts used without ensure() (the GPU routed a layer whose experts were all resident)
  count as hits and refresh recency. Timing (read/upload/wait ms) uses time.perf_counter; `stats()` is a dict.
- Eviction: O(1) LRU or the decaying "hot" count (see recency.py, hot_policy.py). `advance_token()` once per token
  ages the counts and ends the token.
- `prefetch(layer, guesses)` never blocks: it queues reads and starts them while fewer than `max_inflight` reads
  are in flight (demand reads start regardless but count toward the cap). It skips experts that are resident,
  loading or queued, and ignores guesses for a layer already demanded in this token. A demand for layer L drops
  the queued (not yet started) guesses for layers <= L; advance_token drops all queued guesses.
- Protection of the current token: a prefetch may evict only the policy's victim, and only when that slot was not
  *claimed in the current token* (demanded, touched, released or prefetched since the last advance_token);
  otherwise the guess is dropped. So speculation never pushes out what this token has used or fetched. For LRU
  the victim is the least recent slot, so "the victim was claimed this token" means "every evictable slot was".
  A prefetched expert is credited one use when its read starts (its first demand adds none), so the hot policy
  does not evict it as never-used before the demand that it anticipated.
- `wait_for(layer, ids)` waits until those experts are no longer loading or queued (the engine may resume a token
  only once the next layer's guessed experts are in, so that layer does not stop it again).
- Reads are batched: the loads started by one ensure() (its misses) or one prefetch pump go to the reader
  together, per layer, as one `read_records` call where the reader has it (else one `read_record` each, all in
  flight at once); each record's upload starts as soon as its batch is in, so the uploads of one batch overlap
  the reads of the next. No expert is ever read twice at once (a load in flight is a late hit, never a new read).
- Placement (miss_placement.py): a demanded miss the placement does not upload gets ELSEWHERE (-1) in the result,
  takes no slot, is not read and is not pinned (release() skips -1); counted in `placed_elsewhere`.
- Prefetch throttle (prefetch_throttle.py, on unless `prefetch_target=None`): a prefetch call starts only the
  share of its new guesses (first ones first) that the measured prefetch accuracy pays for; the rest count as
  `prefetch_throttled`. A prefetched expert's outcome is "used" at its first demand or touch, "wasted" when it is
  evicted or cleared before that (`prefetch_wasted`, and its bytes apart from the demanded misses' bytes).
- `clear()` forgets all residency. Loads in flight keep their slots until they finish; they belong to an old
  generation, so they skip the upload (or finish it) and then free the slot; pinned slots are freed at release.
  No slot ever has two owners. A demand waiting on a load when `clear()` runs starts over.
"""
import asyncio
from collections import deque
from dataclasses import dataclass
from inspect import isawaitable
from time import perf_counter

from .counters import StreamerCounters
from .miss_placement import ELSEWHERE
from .prefetch_throttle import PrefetchThrottle
from .record_reads import start_reads
from .streamer_parts import Demand, Load, PoolExhausted, make_policy, nbytes_of, retrieve_exception, running_loop


@dataclass(frozen=True)
class StreamerTuning:
    """How the streamer chooses and paces its loads: the eviction policy ("lru", "hot" with its half-life in
    tokens, or a policy object), the loads in flight at most, the prefetch throttle's accuracy target (None: off)."""
    policy: object = "lru"
    half_life_tokens: float = 16.0
    max_inflight: int = 4
    prefetch_target: float = 0.5


class ExpertStreamer:
    def __init__(self, *, layers, experts, slots, reader, uploader, record_bytes=None, on_map_change=None,
                 placement=None, tuning=StreamerTuning()):
        policy, max_inflight, prefetch_target = tuning.policy, tuning.max_inflight, tuning.prefetch_target
        if layers <= 0 or experts <= 0 or slots <= 0:
            raise ValueError(f"layers, experts and slots must be positive, got {layers}, {experts}, {slots}")
        if max_inflight < 1:
            raise ValueError(f"max_inflight must be >= 1, got {max_inflight}")
        self.layers, self.experts, self.slots = layers, experts, slots
        self.reader, self.uploader, self.on_map_change = reader, uploader, on_map_change
        self.record_bytes = record_bytes
        self.max_inflight = max_inflight
        self.policy = make_policy(policy, tuning.half_life_tokens) if isinstance(policy, str) else policy
        self.counters = StreamerCounters(layers)
        self.placement = placement
        self.throttle = PrefetchThrottle(prefetch_target) if prefetch_target is not None else None
        self._unread = []  # loads started whose read is not handed to the reader yet
        self.last_error = None
        self._owner = [-1] * slots  # key held or being loaded, -1 when free (or left to a cleared load)
        self._pins = [0] * slots
        self._claimed_at = [-1] * slots  # token of the slot's last claim
        self._prefetched = [False] * slots  # loaded by prefetch and not demanded yet
        self._free = list(range(slots - 1, -1, -1))  # pop() hands out low slots first
        self._resident = {}  # key -> slot, upload submitted
        self._loading = {}  # key -> Load of the current generation
        self._tasks = {}  # slot -> load task in flight (any generation)
        self._queue = deque()  # (layer, expert) guesses not started yet
        self._queued = set()  # their keys
        self._token = 0
        self._demanded_layer = -1  # highest layer demanded in the current token
        self._generation = 0

    # ---- queries -------------------------------------------------------------------------------------------
    def key(self, layer, expert):
        if not (0 <= layer < self.layers and 0 <= expert < self.experts):
            raise IndexError(f"(layer {layer}, expert {expert}) outside {self.layers} layers x {self.experts} experts")
        return layer * self.experts + expert

    def slot_of(self, layer, expert):
        """The slot holding a resident expert, or -1."""
        return self._resident.get(self.key(layer, expert), -1)

    def slot_key(self, slot):
        """(layer, expert) resident in `slot`, or None."""
        key = self._owner[slot]
        if key < 0 or self._resident.get(key) != slot:
            return None
        return divmod(key, self.experts)

    def pins(self, slot):
        return self._pins[slot]

    @property
    def inflight(self):
        return len(self._tasks)

    @property
    def token(self):
        return self._token

    def stats(self):
        out = self.counters.as_dict()
        out.update(policy=self.policy.name, slots=self.slots, resident=len(self._resident),
                   loading=len(self._loading), free=len(self._free), pinned=sum(1 for p in self._pins if p),
                   inflight=self.inflight, queued=len(self._queue), max_inflight=self.max_inflight,
                   placement=getattr(self.placement, "name", "upload") if self.placement is not None else "upload",
                   throttle=self.throttle.as_dict() if self.throttle is not None else None)
        return out

    # ---- demand --------------------------------------------------------------------------------------------
    def ensure(self, layer, ids):
        ids = [int(e) for e in ids]
        for e in ids:
            self.key(layer, e)
        self._drop_queued(layer)
        self._demanded_layer = max(self._demanded_layer, layer)
        req = Demand(layer, ids, self._generation)
        self._claim_all(req)
        if not req.blocked and not req.waits:
            done = running_loop().create_future()
            done.set_result(req.result())
            return done
        return asyncio.ensure_future(self._complete(req))

    def _claim_all(self, req):
        """Claim the request's experts in order until one has to wait for a slot; releases its pins on error."""
        try:
            for e in req.unique:
                if e in req.slot_of:
                    continue
                claimed = self._claim(req.layer, e)
                if claimed is None:
                    return
                slot, load = claimed
                req.slot_of[e] = slot
                if slot == ELSEWHERE:
                    continue
                req.pinned.append(slot)
                if load is not None:
                    req.waits.append(load)
        except BaseException:
            self._let_go(req)
            raise
        finally:
            self._flush_reads()

    def _claim(self, layer, expert):
        """Pin `expert`'s slot: (slot, load to wait for or None), or None when it must wait for a slot."""
        key = layer * self.experts + expert
        slot = self._resident.get(key)
        load = None
        if slot is not None:
            self.counters.hits[layer] += 1
        else:
            load = self._loading.get(key)
            if load is not None:
                slot = load.slot
                self.counters.late_hits[layer] += 1
            else:
                if self.placement is not None and not self.placement.upload(layer, expert):
                    self.counters.misses[layer] += 1
                    self.counters.placed_elsewhere[layer] += 1
                    return ELSEWHERE, None
                slot = self._take_slot(for_prefetch=False)
                if slot is None:
                    return None
                self.counters.misses[layer] += 1
                load = self._start_load(layer, expert, key, slot, prefetch=False)
        self._pin(slot)
        if self._prefetched[slot]:
            self._prefetched[slot] = False
            self.counters.prefetch_used[layer] += 1
            if self.throttle is not None:
                self.throttle.record(True)
        else:
            self.policy.use(slot, key, self._token)
        return slot, load

    async def _complete(self, req):
        t0 = perf_counter()
        try:
            while True:
                while req.blocked and req.generation == self._generation:
                    # only slots still loading are unpinned: wait for one, then evict it
                    loading = [t for s, t in self._tasks.items() if self._pins[s] == 0]
                    if loading:
                        await asyncio.wait(loading, return_when=asyncio.FIRST_COMPLETED)
                    if req.generation == self._generation:
                        self._claim_all(req)  # raises PoolExhausted when nothing can free a slot
                if req.generation == self._generation:
                    try:
                        done = []
                        for ld in req.waits:  # shield: cancelling this demand must not cancel a shared load
                            task = ld.task
                            done.append(task.result() if task.done() else await asyncio.shield(task))
                    except Exception:
                        if req.generation == self._generation:
                            raise
                        done = ()  # a load of a cleared generation failed: start over like the rest
                    if req.generation == self._generation and all(done):
                        return req.result()
                # cleared while waiting: let go of the old slots and start over in the new generation
                self._let_go(req)
                req.reset(self._generation)
                self._claim_all(req)
        except BaseException:  # failed or cancelled: the caller will never release these pins
            self._let_go(req)
            raise
        finally:
            self.counters.wait_ms[req.layer] += (perf_counter() - t0) * 1e3

    def _let_go(self, req):
        pinned = req.pinned
        req.reset(req.generation)
        self.release(pinned)

    def release(self, slots):
        """Unpin slots returned by ensure() (each distinct slot once) after the submit that reads them."""
        for slot in slots:
            if slot == ELSEWHERE:  # served by another tier: never pinned
                continue
            if self._pins[slot] <= 0:
                raise ValueError(f"release of slot {slot}, which is not pinned")
            self._pins[slot] -= 1
            if self._pins[slot]:
                continue
            key = self._owner[slot]
            if key >= 0 and self._resident.get(key) == slot:
                self._claimed_at[slot] = self._token
                self.policy.admit(slot, key, self._token)
            elif key < 0 and slot not in self._tasks:
                self._free.append(slot)

    def touch(self, layer, ids):
        """Experts a layer used without ensure() (routed on the GPU, all resident): count them as hits and refresh
        their recency. Returns how many were resident."""
        self._drop_queued(layer)
        self._demanded_layer = max(self._demanded_layer, layer)
        n = 0
        for e in dict.fromkeys(int(i) for i in ids):
            key = self.key(layer, e)
            slot = self._resident.get(key)
            if slot is None:
                continue
            n += 1
            self.counters.hits[layer] += 1
            self._claimed_at[slot] = self._token
            if self._prefetched[slot]:
                self._prefetched[slot] = False
                self.counters.prefetch_used[layer] += 1
                if self.throttle is not None:
                    self.throttle.record(True)
            else:
                self.policy.use(slot, key, self._token)
        return n

    # ---- prefetch ------------------------------------------------------------------------------------------
    def prefetch(self, layer, guesses):
        """Queue reads of guessed experts for `layer` and start what the in-flight cap allows. Never blocks."""
        if not 0 <= layer < self.layers:
            return
        if layer <= self._demanded_layer:
            self.counters.prefetch_dropped[layer] += len(guesses)
            return
        fresh = []
        for e in guesses:
            key = self.key(layer, int(e))
            if key in self._resident or key in self._loading or key in self._queued or key in fresh:
                continue
            fresh.append(key)
        allowed = self.throttle.allow(len(fresh)) if self.throttle is not None else len(fresh)
        self.counters.prefetch_throttled[layer] += len(fresh) - allowed
        for key in fresh[:allowed]:
            self._queue.append(divmod(key, self.experts))
            self._queued.add(key)
        self._pump()

    async def wait_for(self, layer, ids):
        """Wait until none of `ids` of `layer` is loading or queued (their prefetches became resident, failed or
        were dropped). Never raises for a failed load: a later demand reads that expert again."""
        keys = {self.key(layer, int(e)) for e in ids}
        while True:
            tasks = [self._loading[k].task for k in keys if k in self._loading]
            if not tasks and keys & self._queued and self._tasks:
                tasks = list(self._tasks.values())  # queued: each starts when a load in flight ends
            if not tasks:
                return
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)

    def _pump(self):
        while self._queue and len(self._tasks) < self.max_inflight:
            layer, expert = self._queue.popleft()
            key = layer * self.experts + expert
            self._queued.discard(key)
            if key in self._resident or key in self._loading:
                continue
            slot = self._take_slot(for_prefetch=True)
            if slot is None:
                self.counters.prefetch_dropped[layer] += 1
                continue
            self.counters.prefetch_issued[layer] += 1
            self.policy.use(slot, key, self._token)
            self._claimed_at[slot] = self._token
            self._start_load(layer, expert, key, slot, prefetch=True)
        self._flush_reads()

    def _drop_queued(self, up_to_layer):
        if not self._queue:
            return
        keep = deque()
        for layer, expert in self._queue:
            if layer <= up_to_layer:
                self._queued.discard(layer * self.experts + expert)
                self.counters.prefetch_dropped[layer] += 1
            else:
                keep.append((layer, expert))
        self._queue = keep

    # ---- slots and loads -----------------------------------------------------------------------------------
    def _take_slot(self, for_prefetch):
        """A slot to load into: a free one, else the policy's victim (evicted). None when a prefetch must not
        evict, or a demand must wait for a loading slot; PoolExhausted when every slot is pinned."""
        if self._free:
            return self._free.pop()
        victim = self.policy.victim()
        if victim is None:
            if for_prefetch or any(self._pins[s] == 0 for s in self._tasks):
                return None
            raise PoolExhausted(
                f"pool exhausted: {self.slots} slots all pinned; raise the GPU budget for the expert pool "
                f"(each layer pins up to top-k experts per token at once, more in batched prefill)")
        if for_prefetch and self._claimed_at[victim] == self._token:
            return None
        self._evict(victim)
        return victim

    def _evict(self, slot):
        key = self._owner[slot]
        self.policy.withdraw(slot)
        del self._resident[key]
        self._owner[slot] = -1
        layer, expert = divmod(key, self.experts)
        self._wasted_if_unused(slot, layer)
        self.counters.evictions[layer] += 1
        if self.on_map_change is not None:
            self.on_map_change(layer, expert, -1)

    def _wasted_if_unused(self, slot, layer):
        if self._prefetched[slot]:
            self._prefetched[slot] = False
            self.counters.prefetch_wasted[layer] += 1
            if self.throttle is not None:
                self.throttle.record(False)

    def _pin(self, slot):
        if self._pins[slot] == 0:
            self.policy.withdraw(slot)
        self._pins[slot] += 1
        self._claimed_at[slot] = self._token

    def _start_load(self, layer, expert, key, slot, prefetch):
        self._owner[slot] = key
        self._prefetched[slot] = prefetch
        load = Load(layer, expert, key, slot, self._generation, prefetch, running_loop().create_future())
        self._loading[key] = load
        self._unread.append(load)
        load.task = asyncio.ensure_future(self._run_load(load))
        load.task.add_done_callback(retrieve_exception)
        self._tasks[slot] = load.task
        return load

    def _flush_reads(self):
        """Hand the loads started since the last flush to the reader: one batch per layer."""
        if self._unread:
            loads, self._unread = self._unread, []
            start_reads(self.reader, loads, self.counters)

    async def _run_load(self, load):
        """Read and upload one record. True when it became resident, False when a clear() discarded it."""
        layer, slot = load.layer, load.slot
        try:
            t0 = perf_counter()
            data = await load.read
            t1 = perf_counter()
            self.counters.read_ms[layer] += (t1 - t0) * 1e3
            n = nbytes_of(data)
            self.counters.bytes_read[layer] += n
            if load.prefetch:
                self.counters.bytes_prefetch[layer] += n
            else:
                self.counters.bytes_demand[layer] += n
            if self.record_bytes is not None and n != self.record_bytes:
                raise ValueError(f"reader returned {n} B for expert {load.expert} of layer {layer}; "
                                 f"expert records are {self.record_bytes} B")
            if load.generation != self._generation:
                return False
            pending = self.uploader.upload(slot, data)
            if isawaitable(pending):
                await pending
            self.counters.upload_ms[layer] += (perf_counter() - t1) * 1e3
            if load.generation != self._generation:
                return False
            del self._loading[load.key]
            self._resident[load.key] = slot
            if self.on_map_change is not None:
                self.on_map_change(layer, load.expert, slot)
            if self._pins[slot] == 0:
                self._claimed_at[slot] = self._token
                self.policy.admit(slot, load.key, self._token)
            return True
        except BaseException as exc:
            self.last_error = exc
            if load.generation == self._generation:
                del self._loading[load.key]
                self._owner[slot] = -1
                self._prefetched[slot] = False
            raise
        finally:
            del self._tasks[slot]
            if self._owner[slot] == -1 and self._pins[slot] == 0:
                self._free.append(slot)
            self._pump()

    # ---- token clock and reset -----------------------------------------------------------------------------
    def advance_token(self, n=1):
        """End the current token (n tokens for a batch): ages hot counts, drops queued guesses."""
        self._drop_queued(self.layers)
        self._token += n
        self._demanded_layer = -1
        self.counters.tokens += n

    def clear(self):
        """Forget all residency (e.g. a new model or budget); safe while loads are in flight."""
        self._generation += 1
        self._queue.clear()
        self._queued.clear()
        for key, slot in self._resident.items():
            self._owner[slot] = -1
            self._wasted_if_unused(slot, key // self.experts)
            if self.on_map_change is not None:
                self.on_map_change(*divmod(key, self.experts), -1)
        for load in self._loading.values():
            self._owner[load.slot] = -1
        self._resident.clear()
        self._loading.clear()
        self.policy.reset()
        self._prefetched = [False] * self.slots
        self._demanded_layer = -1
        self._free = [s for s in range(self.slots - 1, -1, -1) if self._pins[s] == 0 and s not in self._tasks]
