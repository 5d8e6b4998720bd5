"""The expert streamer's rules for demands (hits, misses, duplicates), eviction and its policies, pins and an
exhausted pool; the slot pool's layout and the residency map. Prefetch and clear: test_residency_prefetch.py."""
import asyncio
import math
import random

import pytest

from py_engine.residency import ABSENT, HotPolicy, LruPolicy, PoolExhausted, ResidencyMap, SlotPoolLayout
from streamer_fakes import REC, check_invariants, make_streamer, record, run, settle


# ---- ensure: hits, misses, duplicates -------------------------------------------------------------------------
def test_miss_then_hit_and_duplicate_ids_share_a_slot():
    async def main():
        xs, reader, dev, rmap = make_streamer()
        slots = await xs.ensure(0, [3, 5, 3])
        assert slots[0] == slots[2] != slots[1]
        assert reader.reads == [(0, 3), (0, 5)]
        assert dev.slots[slots[0]] == record(0, 3) and dev.slots[slots[1]] == record(0, 5)
        assert xs.pins(slots[0]) == 1
        xs.release(set(slots))
        again = await xs.ensure(0, [5, 3])
        assert again == [slots[1], slots[0]] and len(reader.reads) == 2
        xs.release(set(again))
        st = xs.stats()
        assert (st["misses"], st["hits"], st["late_hits"]) == (2, 2, 0)
        assert st["bytes_read"] == 2 * REC and st["per_layer"][0]["misses"] == 2 and st["hit_rate"] == 0.5
        check_invariants(xs, dev, rmap)
        with pytest.raises(ValueError, match="not pinned"):
            xs.release([slots[0]])
    run(main())


def test_late_hit_waits_for_the_prefetch_and_reads_once():
    async def main():
        xs, reader, dev, rmap = make_streamer(gated=True)
        xs.prefetch(1, [7])
        await settle()
        assert reader.pending() == [(1, 7)]
        fut = xs.ensure(1, [7])
        await settle()
        assert not fut.done()
        reader.open(1, 7)
        slots = await fut
        assert reader.reads == [(1, 7)] and dev.slots[slots[0]] == record(1, 7)
        st = xs.stats()
        assert (st["late_hits"], st["misses"], st["prefetch_issued"], st["prefetch_used"]) == (1, 0, 1, 1)
        assert st["wait_ms"] > 0
        xs.release(slots)
        check_invariants(xs, dev, rmap)
    run(main())


def test_reader_with_wrong_record_size_is_an_error_and_frees_the_slot():
    async def main():
        xs, reader, dev, rmap = make_streamer()
        xs.record_bytes = REC + 1
        with pytest.raises(ValueError, match="expert records are 65 B"):
            await xs.ensure(0, [1])
        assert xs.stats()["free"] == xs.slots and all(xs.pins(s) == 0 for s in range(xs.slots))
    run(main())


def test_a_cancelled_demand_releases_its_pins():
    async def main():
        xs, reader, dev, rmap = make_streamer(gated=True)
        held = await asyncio.wait_for(asyncio.shield(xs.ensure(0, [])), 1)
        assert held == []
        fut = xs.ensure(0, [1, 2])
        await settle()
        fut.cancel()
        await settle()
        assert all(xs.pins(s) == 0 for s in range(xs.slots))
        reader.open(0, 1)
        reader.open(0, 2)
        await settle()
        assert xs.slot_of(0, 1) >= 0 and xs.inflight == 0  # the loads themselves completed
        check_invariants(xs, dev, rmap)
    run(main())


def test_failed_read_releases_the_demands_pins():
    async def main():
        xs, reader, dev, rmap = make_streamer()
        reader.fail.add((0, 2))
        with pytest.raises(OSError, match="read of"):
            await xs.ensure(0, [1, 2])
        assert all(xs.pins(s) == 0 for s in range(xs.slots))
        assert xs.slot_of(0, 1) >= 0 and xs.slot_of(0, 2) == -1
        reader.fail.clear()
        xs.release(set(await xs.ensure(0, [2])))
        check_invariants(xs, dev, rmap)
    run(main())


# ---- eviction -------------------------------------------------------------------------------------------------
def test_lru_evicts_least_recently_used():
    async def main():
        xs, reader, dev, rmap = make_streamer(slots=3)
        for e in (1, 2, 3):
            xs.release(await xs.ensure(0, [e]))
        xs.release(await xs.ensure(0, [1]))  # refresh 1: order is now 2, 3, 1
        s2 = xs.slot_of(0, 2)
        xs.release(await xs.ensure(0, [4]))
        assert xs.slot_of(0, 2) == -1 and xs.slot_of(0, 4) == s2 and rmap.get(0, 2) == ABSENT
        xs.release(await xs.ensure(0, [5]))
        assert xs.slot_of(0, 3) == -1 and xs.slot_of(0, 1) >= 0
        assert xs.stats()["evictions"] == 2
        check_invariants(xs, dev, rmap)
    run(main())


def test_touch_refreshes_recency_like_a_hit():
    async def main():
        xs, reader, dev, rmap = make_streamer(slots=2)
        for e in (1, 2):
            xs.release(await xs.ensure(0, [e]))
        assert xs.touch(0, [1, 9]) == 1  # 9 is not resident: ignored
        xs.release(await xs.ensure(0, [3]))
        assert xs.slot_of(0, 2) == -1 and xs.slot_of(0, 1) >= 0
    run(main())


def test_hot_policy_keeps_the_most_used_expert():
    async def main():
        xs, reader, dev, rmap = make_streamer(slots=3, policy="hot", half_life_tokens=8)
        for e, uses in ((1, 3), (2, 1), (3, 2)):
            for _ in range(uses):
                xs.release(await xs.ensure(0, [e]))
        xs.release(await xs.ensure(0, [4]))  # evicts 2 (one use), though 1 and 3 are older in LRU terms
        assert xs.slot_of(0, 2) == -1 and xs.slot_of(0, 1) >= 0 and xs.slot_of(0, 3) >= 0
    run(main())


def test_hot_counts_decay_with_the_half_life():
    async def main():
        xs, reader, dev, rmap = make_streamer(slots=3, policy="hot", half_life_tokens=2)
        for _ in range(4):
            xs.release(await xs.ensure(0, [1]))  # count 4 at token 0
        xs.advance_token(10)  # 4 * 2**-5 = 0.125
        for e in (2, 3):
            xs.release(await xs.ensure(0, [e]))  # count 1 each
        assert xs.policy.count(xs.key(0, 1), xs.token) == pytest.approx(0.125)
        xs.release(await xs.ensure(0, [4]))
        assert xs.slot_of(0, 1) == -1  # the once-hot expert went cold
    run(main())


def test_hot_policy_victim_matches_brute_force_decayed_counts():
    rng = random.Random(7)
    h = 3.0
    pol = HotPolicy(h)
    uses = {}  # key -> [tokens of use]
    evictable = {}  # slot -> key
    now = 0
    for _ in range(3000):
        op = rng.random()
        slot = rng.randrange(12)
        if op < 0.4:  # a use names the slot holding the key, as the streamer does
            key = rng.randrange(30)
            holder = [s for s, k in evictable.items() if k == key]
            uses.setdefault(key, []).append(now)
            pol.use(holder[0] if holder else 100 + key, key, now)
        elif op < 0.7 and slot not in evictable:
            key = rng.randrange(30)
            if key not in evictable.values():
                evictable[slot] = key
                pol.admit(slot, key, now)
        elif op < 0.85:
            evictable.pop(slot, None)
            pol.withdraw(slot)
        else:
            now += rng.randrange(1, 4)
        v = pol.victim()
        if not evictable:
            assert v is None
            continue
        counts = {s: sum(2 ** (-(now - t) / h) for t in uses.get(k, ())) for s, k in evictable.items()}
        assert v in evictable
        assert math.isclose(counts[v], min(counts.values()), rel_tol=1e-9, abs_tol=1e-12)
        assert pol.count(evictable[v], now) == pytest.approx(counts[v], rel=1e-9, abs=1e-12)


def test_lru_policy_unit():
    pol = LruPolicy()
    for s in (4, 2, 9):
        pol.admit(s, s, 0)
    pol.use(4, 4, 0)
    assert pol.victim() == 2
    pol.withdraw(2)
    assert pol.victim() == 9 and len(pol) == 2
    pol.reset()
    assert pol.victim() is None


# ---- pins and exhaustion --------------------------------------------------------------------------------------
def test_pinned_slots_are_never_evicted_and_a_full_pin_raises_pool_exhausted():
    async def main():
        xs, reader, dev, rmap = make_streamer(slots=2)
        held = await xs.ensure(0, [1, 2])
        with pytest.raises(PoolExhausted, match="pool exhausted: 2 slots all pinned; raise the GPU budget"):
            xs.ensure(0, [3])
        assert xs.slot_of(0, 1) >= 0 and xs.slot_of(0, 2) >= 0
        assert reader.reads == [(0, 1), (0, 2)]
        xs.release(held)
        xs.release(await xs.ensure(0, [3]))
        assert xs.slot_of(0, 1) == -1
    run(main())


def test_a_demand_larger_than_the_pool_raises_and_keeps_no_pins():
    async def main():
        xs, reader, dev, rmap = make_streamer(slots=3)
        with pytest.raises(PoolExhausted):
            await xs.ensure(0, [1, 2, 3, 4])
        assert all(xs.pins(s) == 0 for s in range(3))
        xs.release(await xs.ensure(0, [5, 6, 7]))
        check_invariants(xs, dev, rmap)
    run(main())


def test_a_demand_waits_for_an_unpinned_loading_slot_instead_of_failing():
    async def main():
        xs, reader, dev, rmap = make_streamer(slots=2, gated=True)
        xs.prefetch(2, [5, 6])
        await settle()
        fut = xs.ensure(1, [9])  # no free slot, nothing evictable, both slots loading unpinned
        await settle()
        assert not fut.done() and reader.pending() == [(2, 5), (2, 6)]
        reader.open(2, 5)
        await settle()
        assert reader.pending() == [(1, 9), (2, 6)]  # the finished prefetch was evicted for the demand
        reader.open(1, 9)
        slots = await fut
        assert dev.slots[slots[0]] == record(1, 9) and xs.slot_of(2, 5) == -1
        reader.open(2, 6)
        await settle()
        xs.release(slots)
        check_invariants(xs, dev, rmap)
    run(main())


# ---- slot pool layout -----------------------------------------------------------------------------------------
MIB = 1 << 20


@pytest.mark.parametrize("record_bytes, per_buffer", [(3_342_336, 40), (5_013_504, 26)])
def test_slot_layout_under_a_128_mib_binding(record_bytes, per_buffer):
    lay = SlotPoolLayout(record_bytes, 1000, 128 * MIB)
    assert lay.slot_stride % 256 == 0 and lay.slot_stride >= record_bytes
    assert lay.slots_per_buffer == per_buffer
    assert lay.buffer_count == math.ceil(1000 / per_buffer)
    assert all(size <= 128 * MIB for size in lay.buffer_sizes) and sum(lay.buffer_sizes) == lay.total_bytes
    seen = set()
    for s in range(1000):
        b, off = lay.locate(s)
        assert off % 256 == 0 and off + record_bytes <= lay.buffer_bytes(b) <= 128 * MIB
        assert (b, off) not in seen
        seen.add((b, off))
    assert lay.locate(per_buffer) == (1, 0)


def test_slot_layout_edges():
    assert SlotPoolLayout(1000, 3, 128 * MIB).buffer_count == 1
    lay = SlotPoolLayout(300, 10, 1024, alignment=256)  # stride 512: two slots per 1 KiB binding
    assert (lay.slot_stride, lay.slots_per_buffer, lay.buffer_count, lay.buffer_sizes) == (512, 2, 5, [1024] * 5)
    assert SlotPoolLayout(300, 5, 1024).buffer_sizes == [1024, 1024, 512]
    with pytest.raises(ValueError, match="does not fit a storage binding"):
        SlotPoolLayout(5_013_504, 4, 4 * MIB)
    with pytest.raises(IndexError):
        lay.locate(10)
    budget = SlotPoolLayout.for_budget(3_342_336, 4 << 30, 128 * MIB)
    assert budget.slots == (4 << 30) // 3_342_336 and budget.total_bytes <= 4 << 30


# ---- residency map --------------------------------------------------------------------------------------------
def test_residency_map_mirror_gets_only_changed_ranges():
    rng = random.Random(3)
    m = ResidencyMap(6, 40, merge_gap=4)
    gpu = bytearray(b"\xab" * m.nbytes)  # garbage until the first flush

    def write(offset, data):
        assert offset % 4 == 0 and len(data) % 4 == 0
        gpu[offset:offset + len(data)] = data

    assert m.flush(write) == m.nbytes
    assert bytes(gpu) == b"\xff" * m.nbytes
    m.set(2, 7, 11)
    assert m.flush(write) == 4
    assert m.flush(write) == 0
    for _ in range(50):
        for _ in range(rng.randrange(1, 6)):
            m.set(rng.randrange(6), rng.randrange(40), rng.choice([ABSENT, rng.randrange(100)]))
        dirty = m.dirty_ranges()
        n = m.flush(write)
        assert n == sum(b - a for a, b in dirty) * 4
        assert bytes(gpu) == m.entries.tobytes()
    m.set(0, 0, 1)
    m.set(0, 3, 1)  # gap 2 <= 4: one range
    m.set(5, 39, 2)
    assert m.dirty_ranges() == [(0, 4), (239, 240)]
    m.reset()
    m.flush(write)
    assert bytes(gpu) == b"\xff" * m.nbytes
