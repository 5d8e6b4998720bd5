"""The expert streamer's prefetch (guesses queued, reads capped, pinned and current-token slots never evicted,
prefetched experts counted once when used), clear() while loads are in flight, and random schedules that keep
every invariant, with the fake reader and device of streamer_fakes.py."""
import random

import pytest

from py_engine.residency import ABSENT, PoolExhausted
from streamer_fakes import check_invariants, make_streamer, record, run, settle


# ---- prefetch -------------------------------------------------------------------------------------------------
def test_prefetch_returns_at_once_and_caps_reads_in_flight():
    async def main():
        xs, reader, dev, rmap = make_streamer(slots=8, gated=True, max_inflight=2)
        assert xs.prefetch(1, [1, 2, 3, 4]) is None  # synchronous, nothing to await
        await settle()
        assert reader.pending() == [(1, 1), (1, 2)] and xs.inflight == 2 and xs.stats()["queued"] == 2
        reader.open(1, 1)
        await settle()
        assert reader.pending() == [(1, 2), (1, 3)] and xs.inflight == 2
        assert xs.stats()["prefetch_issued"] == 3
    run(main())


def test_a_demand_drops_queued_guesses_for_its_layer_and_earlier():
    async def main():
        xs, reader, dev, rmap = make_streamer(slots=8, gated=True, max_inflight=1)
        xs.prefetch(1, [1])
        xs.prefetch(1, [2, 3])
        xs.prefetch(2, [4])
        xs.prefetch(3, [5])
        await settle()
        assert reader.pending() == [(1, 1)]
        fut = xs.ensure(2, [4])  # drops queued (1,2) (1,3) (2,4); a miss for (2,4) reads at once
        await settle()
        assert reader.pending() == [(1, 1), (2, 4)]
        st = xs.stats()
        assert st["per_layer"][1]["prefetch_dropped"] == 2 and st["per_layer"][2]["prefetch_dropped"] == 1
        reader.open(1, 1)
        reader.open(2, 4)
        xs.release(await fut)
        await settle()
        assert reader.pending() == [(3, 5)]  # the guess for a later layer survived
        xs.prefetch(2, [7])  # layer 2 was demanded in this token: ignored
        await settle()
        assert reader.pending() == [(3, 5)] and xs.stats()["per_layer"][2]["prefetch_dropped"] == 2
        xs.advance_token()
        xs.prefetch(2, [7])
        xs.prefetch(3, [8])
        await settle()
        assert reader.pending() == [(3, 5)]
        xs.advance_token()  # drops all that is queued
        assert xs.stats()["queued"] == 0
    run(main())


def test_prefetch_skips_resident_loading_and_queued_experts():
    async def main():
        xs, reader, dev, rmap = make_streamer(slots=8, gated=True, max_inflight=1)
        fut = xs.ensure(0, [1])
        await settle()
        reader.open(0, 1)
        xs.release(await fut)
        xs.advance_token()
        xs.prefetch(0, [1])  # resident
        xs.prefetch(1, [2, 3])  # 2 starts, 3 is queued
        xs.prefetch(1, [2, 3])  # loading and queued
        await settle()
        assert reader.pending() == [(1, 2)] and xs.stats()["queued"] == 1
        reader.open(1, 2)
        await settle()
        assert reader.reads == [(0, 1), (1, 2), (1, 3)]
        st = xs.stats()
        assert (st["prefetch_issued"], st["prefetch_dropped"]) == (2, 0)


def test_prefetch_never_evicts_pinned_or_current_token_slots():
    async def main():
        xs, reader, dev, rmap = make_streamer(slots=2)
        xs.release(await xs.ensure(0, [1, 2]))
        xs.prefetch(1, [3])  # both slots were demanded in this token
        await settle()
        assert (0 <= xs.slot_of(0, 1)) and (0 <= xs.slot_of(0, 2)) and xs.slot_of(1, 3) == -1
        assert xs.stats()["per_layer"][1]["prefetch_dropped"] == 1
        xs.advance_token()
        held = await xs.ensure(0, [1])
        xs.prefetch(1, [3])  # 2 is from the previous token and unpinned: it may go
        await settle()
        assert xs.slot_of(0, 2) == -1 and xs.slot_of(1, 3) >= 0
        xs.advance_token()
        xs.prefetch(1, [4])  # victim is 1's slot? no: 1 is pinned; 3 was prefetched last token: evicted
        await settle()
        assert xs.slot_of(0, 1) == held[0] and xs.slot_of(1, 3) == -1 and xs.slot_of(1, 4) >= 0
        xs.advance_token()
        xs.prefetch(2, [5])  # 4 (last token) goes; 1 stays pinned
        xs.prefetch(2, [6])  # nothing left but the pinned slot and 5, fetched this token
        await settle()
        assert xs.slot_of(0, 1) == held[0] and xs.slot_of(2, 5) >= 0 and xs.slot_of(2, 6) == -1
        xs.release(held)
        st = xs.stats()
        assert st["prefetch_issued"] == 3 and st["prefetch_used"] == 0
    run(main())


def test_prefetch_used_counts_hits_on_prefetched_experts_once():
    async def main():
        xs, reader, dev, rmap = make_streamer(slots=8)
        xs.prefetch(1, [2, 3])
        await settle()
        xs.release(await xs.ensure(1, [2]))
        xs.release(await xs.ensure(1, [2]))
        st = xs.stats()
        assert (st["prefetch_issued"], st["prefetch_used"], st["hits"]) == (2, 1, 2)
        assert st["prefetch_accuracy"] == 0.5
    run(main())


# ---- clear during loads ---------------------------------------------------------------------------------------
def test_clear_while_loads_are_in_flight_leaves_no_slot_double_owned():
    async def main():
        xs, reader, dev, rmap = make_streamer(slots=3, gated=True)
        demand = xs.ensure(0, [1])
        xs.prefetch(1, [2])
        await settle()
        old_slots = {xs._loading[xs.key(0, 1)].slot, xs._loading[xs.key(1, 2)].slot}
        xs.clear()
        assert xs.stats()["free"] == 1  # the two loading slots stay with their old loads
        other = xs.ensure(0, [5])
        await settle()
        new_slot = xs._loading[xs.key(0, 5)].slot
        assert new_slot not in old_slots
        reader.open(1, 2)  # the old prefetch completes into a freed slot: no upload, no residency
        await settle()
        assert xs.slot_of(1, 2) == -1 and all(d != record(1, 2) for _, d in dev.uploads)
        # the waiting demand starts over in the new generation: a second read of (0, 1)
        assert reader.pending() == [(0, 1), (0, 5)]
        reader.open(0, 1)
        await settle()
        reader.open(0, 1)
        reader.open(0, 5)
        s1, s5 = (await demand)[0], (await other)[0]
        assert s1 != s5 and dev.slots[s1] == record(0, 1) and dev.slots[s5] == record(0, 5)
        assert [s for s in range(3) if xs.pins(s)] == sorted([s1, s5])
        xs.release([s1, s5])
        check_invariants(xs, dev, rmap)
        assert rmap.get(1, 2) == ABSENT
    run(main())


def test_clear_frees_pinned_slots_only_at_release():
    async def main():
        xs, reader, dev, rmap = make_streamer(slots=2)
        held = await xs.ensure(0, [1, 2])
        xs.clear()
        assert rmap.get(0, 1) == ABSENT and xs.slot_of(0, 1) == -1
        with pytest.raises(PoolExhausted):
            xs.ensure(0, [3])  # both slots still pinned by a submit in flight
        xs.release(held)
        got = await xs.ensure(0, [3, 4])
        assert sorted(got) == [0, 1]
        xs.release(got)
        check_invariants(xs, dev, rmap)
    run(main())


def test_random_schedules_keep_every_invariant():
    """Random interleavings of demands, prefetches, token ends and clears, with reads finishing out of order."""
    async def scenario(seed, policy):
        rng = random.Random(seed)
        xs, reader, dev, rmap = make_streamer(slots=10, layers=4, experts=12, policy=policy, max_inflight=3)
        reader.yields = lambda layer, expert: rng.randrange(4)
        for _ in range(60):
            for layer in range(4):
                ids = rng.sample(range(12), 3) + [rng.randrange(12)]
                fut = xs.ensure(layer, ids)
                if layer + 1 < 4:
                    xs.prefetch(layer + 1, rng.sample(range(12), 3))
                if rng.random() < 0.03:
                    xs.clear()
                slots = await fut
                assert len(set(slots)) == len(set(ids))
                for e, s in zip(ids, slots):
                    assert dev.slots[s] == record(layer, e)
                    assert xs.pins(s) >= 1
                xs.release(set(slots))
                check_invariants(xs, dev, rmap)
            xs.advance_token()
        await settle(50)
        assert xs.inflight == 0 and all(xs.pins(s) == 0 for s in range(10))
        check_invariants(xs, dev, rmap)
        st = xs.stats()
        assert st["hits"] + st["late_hits"] + st["misses"] == st["demanded"] > 0
    for seed in range(6):
        run(scenario(seed, "lru" if seed % 2 else "hot"))
