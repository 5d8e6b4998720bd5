"""The streamer's parallel miss path: reads batched per layer and in flight together, uploads overlapping the next
batch's reads, no expert read twice, prefetch throttled by its accuracy, wasted prefetch bytes apart from demanded
misses, and the placement hook (a miss served by another tier instead of a slot)."""
import asyncio

import pytest

from py_engine.residency import ExpertStreamer, ResidencyMap, StreamerTuning
from py_engine.residency.miss_placement import ELSEWHERE
from py_engine.residency.prefetch_throttle import PrefetchThrottle
from streamer_fakes import REC, FakeDevice, FakeReader, check_invariants, record, run, settle


class BatchReader(FakeReader):
    """read_records: one call per batch, gated per batch (open_batch(i)) when gated=True."""

    def __init__(self, gated=False):
        super().__init__()
        self.batches, self.batch_gates, self.batch_gated = [], [], gated
        self.log = []  # ("read", layer, experts) when a batch's read completes

    async def read_records(self, layer, experts):
        self.batches.append((layer, list(experts)))
        self.reads += [(layer, e) for e in experts]
        if self.batch_gated:
            fut = asyncio.get_running_loop().create_future()
            self.batch_gates.append(fut)
            await fut
        if any((layer, e) in self.fail for e in experts):
            raise OSError(f"read of layer {layer} failed")
        self.log.append(("read", layer, list(experts)))
        return [record(layer, e) for e in experts]

    def open_batch(self, i):
        self.batch_gates[i].set_result(None)


class LoggingDevice(FakeDevice):
    def __init__(self, log):
        super().__init__()
        self.log = log

    def upload(self, slot, data):
        super().upload(slot, data)
        self.log.append(("upload", data[0], data[1]))


def make(slots=8, layers=4, experts=16, gated=False, placement=None, **tuning):
    reader = BatchReader(gated=gated)
    dev, rmap = LoggingDevice(reader.log), ResidencyMap(layers, experts)
    xs = ExpertStreamer(layers=layers, experts=experts, slots=slots, reader=reader, uploader=dev, record_bytes=REC,
                        on_map_change=rmap.set, placement=placement,
                        tuning=StreamerTuning(**{"max_inflight": 8, **tuning}))
    return xs, reader, dev, rmap


def test_a_demand_reads_its_misses_in_one_batch_before_the_prefetch_batch():
    async def main():
        xs, reader, dev, rmap = make()
        pending = xs.ensure(0, [1, 2, 3, 2])
        xs.prefetch(1, [4, 5])
        slots = await pending
        assert reader.batches[0] == (0, [1, 2, 3]) and reader.batches[1] == (1, [4, 5])
        assert [dev.slots[s] for s in slots] == [record(0, e) for e in (1, 2, 3, 2)]
        xs.release(set(slots))
        await settle()
        st = xs.stats()
        assert st["read_batches"] == 2 and st["bytes_demand"] == 3 * REC and st["bytes_prefetch"] == 2 * REC
        check_invariants(xs, dev, rmap)
    run(main())


def test_uploads_of_one_batch_run_while_the_next_batch_is_still_reading():
    async def main():
        xs, reader, dev, rmap = make(gated=True)
        first = xs.ensure(0, [1, 2])
        xs.prefetch(1, [3])
        await settle()
        assert len(reader.batches) == 2  # both batches in flight at once
        reader.open_batch(0)
        slots = await first
        await settle()
        # layer 0's records are uploaded while layer 1's read has not finished
        assert reader.log == [("read", 0, [1, 2]), ("upload", 0, 1), ("upload", 0, 2)]
        reader.open_batch(1)
        await settle()
        assert reader.log[-2:] == [("read", 1, [3]), ("upload", 1, 3)]
        xs.release(set(slots))
        check_invariants(xs, dev, rmap)
    run(main())


def test_an_expert_in_flight_is_never_read_again():
    async def main():
        xs, reader, dev, rmap = make(gated=True)
        xs.prefetch(2, [7, 8])
        await settle()
        xs.prefetch(2, [7, 8, 9])  # 7 and 8 loading: only 9 is new
        demand = xs.ensure(2, [8, 7])
        await settle()
        assert sorted(reader.reads) == [(2, 7), (2, 8), (2, 9)]
        for i in range(len(reader.batch_gates)):
            reader.open_batch(i)
        slots = await demand
        st = xs.stats()
        assert (st["late_hits"], st["misses"], st["bytes_demand"]) == (2, 0, 0)
        xs.release(set(slots))
        check_invariants(xs, dev, rmap)
    run(main())


def test_a_failed_batch_fails_the_demand_and_frees_its_slots():
    async def main():
        xs, reader, dev, rmap = make()
        reader.fail.add((0, 2))
        with pytest.raises(OSError, match="layer 0"):
            await xs.ensure(0, [1, 2])
        assert xs.stats()["pinned"] == 0 and xs.stats()["free"] == xs.slots
        slots = await xs.ensure(0, [1])  # the reader works again for other records
        xs.release(set(slots))
        check_invariants(xs, dev, rmap)
    run(main())


def test_throttle_follows_the_measured_accuracy():
    t = PrefetchThrottle(target=0.5, window=4)
    assert t.allow(8) == 8  # optimistic until measured
    for _ in range(8):
        t.record(False)
    assert t.accuracy < 0.11 and t.allow(8) == 1  # the floor keeps measuring
    for _ in range(8):
        t.record(True)
    assert t.accuracy > 0.5 and t.allow(8) == 8
    with pytest.raises(ValueError):
        PrefetchThrottle(target=0)


def test_wasted_prefetches_are_counted_apart_and_throttle_later_guesses():
    async def main():
        xs, reader, dev, rmap = make(slots=4, experts=32)
        xs.throttle.alpha = 0.5  # react within a few outcomes
        for token in range(4):  # each token guesses 4 experts of layer 1 and then uses other ones
            xs.prefetch(1, [4 * token + e for e in range(4)])
            await settle()
            slots = await xs.ensure(1, [20 + token])
            xs.release(set(slots))
            xs.advance_token()
        st = xs.stats()
        assert st["prefetch_wasted"] > 0 and st["prefetch_used"] == 0
        assert st["wasted_prefetch_bytes"] == st["prefetch_wasted"] * REC
        assert st["bytes_demand"] == 4 * REC and st["bytes_read"] == st["bytes_demand"] + st["bytes_prefetch"]
        assert st["prefetch_throttled"] > 0 and st["prefetch_issued"] < 16
        assert st["throttle"]["accuracy"] < 0.5
        check_invariants(xs, dev, rmap)
    run(main())


def test_no_throttle_reads_every_guess():
    async def main():
        xs, reader, dev, rmap = make(slots=4, experts=32, prefetch_target=None)
        for token in range(4):
            xs.prefetch(1, [4 * token + e for e in range(4)])
            await settle()
            xs.release(set(await xs.ensure(1, [20 + token])))
            xs.advance_token()
        assert xs.stats()["prefetch_throttled"] == 0 and xs.stats()["throttle"] is None
    run(main())


class ComputeOdd:
    name = "odd-elsewhere"

    def upload(self, layer, expert):
        return expert % 2 == 0


def test_placement_sends_a_miss_elsewhere_without_a_slot_or_a_read():
    async def main():
        xs, reader, dev, rmap = make(placement=ComputeOdd())
        slots = await xs.ensure(0, [2, 3, 4, 3])
        assert slots[1] == slots[3] == ELSEWHERE and slots[0] >= 0 and slots[2] >= 0
        assert reader.reads == [(0, 2), (0, 4)]
        st = xs.stats()
        assert (st["misses"], st["placed_elsewhere"], st["pinned"], st["placement"]) == (3, 1, 2, "odd-elsewhere")
        xs.release(set(slots))  # -1 is skipped
        assert xs.stats()["pinned"] == 0
        assert xs.slot_of(0, 3) == -1
        check_invariants(xs, dev, rmap)
    run(main())


def test_a_large_demand_is_read_in_pieces_all_in_flight_at_once():
    """A prefill chunk's union of a layer's experts: reader calls of at most MAX_BATCH records, issued together, so
    the first piece's uploads need not wait for the last piece's reads."""
    from py_engine.residency.record_reads import MAX_BATCH

    async def main():
        n = 2 * MAX_BATCH + 3
        xs, reader, dev, rmap = make(slots=n, experts=n, gated=True)
        demand = xs.ensure(0, range(n))
        await settle()
        sizes = [len(experts) for _, experts in reader.batches]
        assert sizes == [MAX_BATCH, MAX_BATCH, 3]  # every piece in flight before any finished
        reader.open_batch(0)
        await settle()
        assert [e for kind, _, e in reader.log if kind == "upload"] == list(range(MAX_BATCH))
        reader.open_batch(1)
        reader.open_batch(2)
        slots = await demand
        assert len(set(slots)) == n and xs.stats()["read_batches"] == 3
        xs.release(set(slots))
        check_invariants(xs, dev, rmap)
    run(main())
