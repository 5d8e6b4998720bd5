"""The expert streamer's test doubles: a reader with controllable completion, a device that is a dict of slots, and
the checks every streamer test shares (tests/unit/test_residency*.py)."""
import asyncio

from py_engine.residency import ABSENT, ExpertStreamer, ResidencyMap, StreamerTuning

REC = 64  # bytes per fake record


def record(layer, expert):
    """A record whose bytes say which expert it is."""
    return bytes([layer, expert]) * (REC // 2)


class FakeReader:
    """read_record returns the expert's record; with gated=True each read waits until the test calls open()."""

    def __init__(self, gated=False, yields=0):
        self.gated, self.yields = gated, yields
        self.reads = []
        self.gates = {}
        self.fail = set()

    async def read_record(self, layer, expert):
        self.reads.append((layer, expert))
        if self.gated:
            fut = asyncio.get_running_loop().create_future()
            self.gates.setdefault((layer, expert), []).append(fut)
            await fut
        for _ in range(self.yields(layer, expert) if callable(self.yields) else self.yields):
            await asyncio.sleep(0)
        if (layer, expert) in self.fail:
            raise OSError(f"read of {(layer, expert)} failed")
        return record(layer, expert)

    def open(self, layer, expert):
        for fut in self.gates.pop((layer, expert)):
            fut.set_result(None)

    def pending(self):
        return sorted(self.gates)


class FakeDevice:
    """The uploader: records which bytes landed in which slot, in order."""

    def __init__(self):
        self.slots = {}
        self.uploads = []

    def upload(self, slot, data):
        self.slots[slot] = bytes(data)
        self.uploads.append((slot, bytes(data)))


def make_streamer(slots=4, layers=4, experts=16, gated=False, **tuning):
    reader, dev = FakeReader(gated=gated), FakeDevice()
    rmap = ResidencyMap(layers, experts)
    xs = ExpertStreamer(layers=layers, experts=experts, slots=slots, reader=reader, uploader=dev, record_bytes=REC,
                        on_map_change=rmap.set, tuning=StreamerTuning(**tuning))
    return xs, reader, dev, rmap


def run(coro):
    async def bounded():  # a broken streamer fails the test instead of hanging it
        return await asyncio.wait_for(coro, 10)
    return asyncio.run(bounded())


async def settle(n=20):
    for _ in range(n):
        await asyncio.sleep(0)


def check_invariants(xs, dev, rmap):
    """Every resident expert's slot holds its bytes, no slot has two owners, and the map mirrors residency."""
    seen = {}
    for s in range(xs.slots):
        k = xs.slot_key(s)
        if k is not None:
            assert k not in seen, f"{k} resident in slots {seen[k]} and {s}"
            seen[k] = s
            assert dev.slots[s] == record(*k)
    for layer in range(xs.layers):
        for e in range(xs.experts):
            assert rmap.get(layer, e) == seen.get((layer, e), ABSENT)
    loading_slots = [ld.slot for ld in xs._loading.values()]
    assert len(set(loading_slots) | set(seen.values())) == len(loading_slots) + len(seen)
    assert not set(xs._free) & (set(loading_slots) | set(seen.values()) | set(xs._tasks))
