"""Uploads into GPU buffers through a ring of mapped MAP_WRITE staging buffers + copyBufferToBuffer.

Why: `queue.writeBuffer` copies through the browser's own staging path (the reference measured 1.88 GB/s), while
writing into a mapped MAP_WRITE buffer and copying it on the GPU reached 27.5 GB/s. Each ring buffer cycles:
mapped (filled by the CPU) -> unmapped + copy submitted -> `mapAsync(WRITE)` requested -> mapped again when the GPU
has finished the copy. Uploads wait only when every ring buffer is still in flight. The uploads queued in the same
turn of the event loop (a layer's records, read in one batch) share one submit, made by one call into a small JS
function that also fills the buffers from records that are JS arrays already (Node's fs, the browser's reader pool):
a few FFI calls per record instead of ten. A buffer already mapped again is used without awaiting its promise.

`WriteBufferUploads` is the same interface over `writeBuffer` (the fallback behind the engine's `upload` option).
"""
import asyncio

import js
from .buffers import COPY_SRC, MAP_WRITE, round4
from .jsutil import js_bytes, js_object, load_program

_submit_js = None


def _submit_fn():
    global _submit_js
    if _submit_js is None:
        _submit_js = load_program("staging_submit.js")
    return _submit_js


def _fill(mapped, data, n):
    """Copy `data` (n bytes: Python bytes-like or a JS Uint8Array) into a mapped ArrayBuffer range."""
    view = js.Uint8Array.new(mapped, 0, n)  # assign() wants equal lengths; the range is rounded up to 4
    if hasattr(data, "byteLength"):  # a JS typed array (the browser's reader pool hands these out)
        view.set(data)
        return
    try:
        view.assign(memoryview(data).cast("B"))  # Pyodide: one copy straight from the Python buffer
    except (AttributeError, TypeError):
        view.set(js_bytes(data))


def _nbytes(data) -> int:
    return int(data.byteLength) if hasattr(data, "byteLength") else memoryview(data).nbytes


class StagingRing:
    """`n` staging buffers of `size` bytes each; `await upload(dst, offset, data)` copies data (<= size) into
    dst[offset:] and returns once the copy is submitted (queue order makes later dispatches see it)."""

    def __init__(self, gpu, size: int, n: int = 4, label: str = "staging_ring"):
        if n < 1 or size <= 0:
            raise ValueError(f"staging ring needs n >= 1 buffers of > 0 bytes, got {n} x {size}")
        self.gpu = gpu
        self.size = round4(size)
        self.n = n
        self.nbytes = self.size * n
        self.uploads = 0
        self.bytes = 0
        self.submits = 0
        self._copies = []  # (staging buffer, dst, offset, bytes, future) filled, not yet submitted
        self._idle = asyncio.Queue()
        self._buffers = []
        for i in range(n):
            buf = gpu.device.createBuffer(js_object({"size": self.size, "usage": MAP_WRITE | COPY_SRC,
                                                     "mappedAtCreation": True, "label": f"{label}.{i}"}))
            self._buffers.append(buf)
            self._idle.put_nowait((buf, None))  # (buffer, pending mapAsync promise or None when mapped)

    async def upload(self, dst, offset: int, data) -> None:
        n = _nbytes(data)
        if n > self.size:
            raise ValueError(f"upload of {n} B exceeds the staging buffers' {self.size} B")
        buf, pending = await self._idle.get()
        try:
            if pending is not None and str(buf.mapState) != "mapped":  # an await costs ~0.1 ms under Pyodide
                await pending
            if not hasattr(data, "byteLength"):  # Python bytes: one copy straight from the Python buffer, here
                _fill(buf.getMappedRange(0, round4(n)), data, n)
                data = None
        except BaseException:
            self._idle.put_nowait((buf, pending))
            raise
        fut = asyncio.get_event_loop().create_future()
        self._copies.append((buf, data, dst, offset, n, fut))
        if len(self._copies) == 1:
            asyncio.get_event_loop().call_soon(self._submit)
        self.uploads += 1
        self.bytes += n
        await fut

    def _submit(self):
        """Fill (from JS arrays), unmap and copy every queued upload in one submit; map the buffers again."""
        copies, self._copies = self._copies, []
        items = js.Array.of(*(js.Array.of(buf, data, dst, offset, round4(n), n)
                              for buf, data, dst, offset, n, _ in copies))
        try:
            remapped = list(_submit_fn()(self.gpu.device, items))
            error = None
        except Exception as exc:  # the device's message; each waiting upload raises it
            remapped = [buf.mapAsync(MAP_WRITE) if _unmapped(buf) else None for buf, *_ in copies]
            error = exc
        self.submits += 1
        for (buf, *_, fut), pending in zip(copies, remapped):
            self._idle.put_nowait((buf, pending))  # resolves once the copy has run
            if fut.done():
                continue
            if error is None:
                fut.set_result(None)
            else:
                fut.set_exception(error)

    async def drain(self):
        """Wait until every ring buffer is mapped again (all copies done)."""
        items = [await self._idle.get() for _ in range(self.n)]
        out = []
        for buf, pending in items:
            if pending is not None:
                await pending
            out.append((buf, None))
        for item in out:
            self._idle.put_nowait(item)

    def release(self):
        for b in self._buffers:
            b.destroy()
        self._buffers.clear()


def _unmapped(buf) -> bool:
    return str(getattr(buf, "mapState", "unmapped")) == "unmapped"


class WriteBufferUploads:
    """The fallback: `queue.writeBuffer` per upload (no staging buffers of our own)."""

    nbytes = 0

    def __init__(self, gpu):
        self.gpu = gpu
        self.uploads = 0
        self.bytes = 0

    async def upload(self, dst, offset: int, data) -> None:
        n = _nbytes(data)
        if n % 4:
            raise ValueError(f"writeBuffer needs a multiple of 4 bytes, got {n}")
        if hasattr(data, "byteLength"):
            self.gpu.queue.writeBuffer(dst, offset, data)
        else:
            self.gpu.queue.writeBuffer(dst, offset, js_bytes(data))
        self.uploads += 1
        self.bytes += n

    async def drain(self):
        pass

    def release(self):
        pass
