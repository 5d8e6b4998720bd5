"""A pool of reader workers (web/reader_worker.js) serving random record reads of a stored file in parallel.

Each worker holds a read-only sync access handle on the file; a read goes to the worker with the fewest reads in
flight and comes back as a JS Uint8Array in a transferred buffer, ready for GPU upload without a trip through
Python memory (`read_js`); `read` gives Python bytes. `measure()` reports what the disk path can deliver:
sequential MB/s, single random-record latency (p50/p90) and MB/s, and bursts of 8 records (one token-layer's
experts) issued together. Pyodide only.
"""
import asyncio
import random

import js
from pyodide.ffi import create_proxy, to_js

from .errors import StoreError
from .layout import EXPERTS_FILE
from .opfs import ROOT_DIR


def _msg(d):
    return to_js(d, dict_converter=js.Object.fromEntries)


class ReaderPool:
    def __init__(self, model, file, workers):
        self.model, self.file, self.workers = model, file, workers
        self.size = None
        self._next_id = 0
        self._waiting = {}        # id -> future
        self._in_flight = [0] * len(workers)
        self._proxies = []

    @classmethod
    async def open(cls, model: str, file: str = EXPERTS_FILE, n_workers: int = 4, url: str = None):
        url = url or js.URL.new("/reader_worker.js", js.location.href).href
        workers = [js.Worker.new(url) for _ in range(n_workers)]
        pool = cls(model, file, workers)
        for i, w in enumerate(workers):
            p = create_proxy(lambda ev, i=i: pool._on_message(i, ev))
            pool._proxies.append(p)
            w.onmessage = p
        opened = await asyncio.gather(*(pool._call(i, {"type": "open", "root": ROOT_DIR, "model": model,
                                                       "file": file}) for i in range(n_workers)))
        pool.size = int(opened[0].size)
        return pool

    def _on_message(self, i, ev):
        data = ev.data
        fut = self._waiting.pop(int(data.id), None)
        self._in_flight[i] -= 1
        if fut is None or fut.done():
            return
        if data.ok:
            fut.set_result(data)
        else:
            fut.set_exception(StoreError(f"reader of {self.model}/{self.file}: {data.error}"))

    def _call(self, i, msg):
        fut = asyncio.get_event_loop().create_future()
        self._next_id += 1
        self._waiting[self._next_id] = fut
        self._in_flight[i] += 1
        self.workers[i].postMessage(_msg({**msg, "id": self._next_id}))
        return fut

    async def read_js(self, offset: int, n: int):
        """The bytes [offset, offset + n) as a JS Uint8Array."""
        i = min(range(len(self.workers)), key=self._in_flight.__getitem__)
        reply = await self._call(i, {"type": "read", "offset": offset, "n": n})
        if int(reply.got) != n:
            raise StoreError(f"{self.model}/{self.file}: read {int(reply.got)} of {n} bytes at {offset}")
        return reply.buf

    async def read(self, offset: int, n: int) -> bytes:
        return (await self.read_js(offset, n)).to_bytes()

    def terminate(self):
        """Stop the workers now (their read-only handles go with them); reads in flight never answer."""
        for w in self.workers:
            w.terminate()
        for p in self._proxies:
            p.destroy()
        self._proxies.clear()
        for fut in self._waiting.values():
            if not fut.done():
                fut.cancel()
        self._waiting.clear()

    async def close(self):
        await asyncio.gather(*(self._call(i, {"type": "close"}) for i in range(len(self.workers))))
        for w in self.workers:
            w.terminate()
        for p in self._proxies:
            p.destroy()


def _pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else None


async def measure(pool: ReaderPool, record_size: int, n_records: int, seq_bytes: int = 256 << 20,
                  samples: int = 64, bursts: int = 16, seed: int = 0) -> dict:
    """Disk figures of a stored expert file through `pool`: sequential, random records, bursts of 8."""
    now = js.performance.now
    rng = random.Random(seed)
    out = {"record_bytes": record_size, "readers": len(pool.workers)}

    chunk = 8 << 20
    total = min(seq_bytes, pool.size) // chunk * chunk or min(seq_bytes, pool.size)
    t0 = now()
    await asyncio.gather(*(pool.read_js(off, min(chunk, total - off)) for off in range(0, total, chunk)))
    out["sequential_mb_s"] = total / max(now() - t0, 1e-3) / 1e3

    lat = []
    t0 = now()
    for _ in range(samples):
        r = rng.randrange(n_records)
        t = now()
        await pool.read_js(r * record_size, record_size)
        lat.append(now() - t)
    out["random_p50_ms"], out["random_p90_ms"] = _pct(lat, 0.5), _pct(lat, 0.9)
    out["random_mb_s"] = samples * record_size / max(now() - t0, 1e-3) / 1e3

    lat = []
    t0 = now()
    for _ in range(bursts):
        ids = rng.sample(range(n_records), min(8, n_records))
        t = now()
        await asyncio.gather(*(pool.read_js(r * record_size, record_size) for r in ids))
        lat.append(now() - t)
    out["burst8_p50_ms"], out["burst8_p90_ms"] = _pct(lat, 0.5), _pct(lat, 0.9)
    out["burst8_mb_s"] = bursts * min(8, n_records) * record_size / max(now() - t0, 1e-3) / 1e3
    return out
