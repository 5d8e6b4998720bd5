"""GPU buffers: creation within the device's limits, uploads from Python bytes, readback to Python bytes."""
import js

from .jsutil import js_bytes, load_program

# A Python buffer handed to JS becomes a PyProxy; `getBuffer` gives a Uint8Array over the Python object's own bytes
# in the WASM heap (no copy), so `writeBuffer` copies once, straight from Python memory. Done inside one JS call so
# nothing can grow (and detach) the heap between taking the view and using it; `size` is explicit, so a detached
# view would fail loudly instead of writing nothing.
_write_view = None

MAP_READ = 0x0001
MAP_WRITE = 0x0002
COPY_SRC = 0x0004
COPY_DST = 0x0008
UNIFORM = 0x0040
STORAGE = 0x0080
INDIRECT = 0x0100

UPLOAD_CHUNK = 32 << 20  # writeBuffer copies through a JS typed array: keep each copy moderate


class BufferTooLarge(ValueError):
    """A buffer larger than the device allows for one binding: split it (row bands, several pool buffers)."""


def round4(n: int) -> int:
    return (n + 3) & ~3


def create_buffer(gpu, nbytes: int, usage: int, label: str = ""):
    size = max(4, round4(nbytes))
    if size > gpu.limits["maxBufferSize"]:
        raise BufferTooLarge(f"buffer {label!r} of {size} B exceeds maxBufferSize {gpu.limits['maxBufferSize']}")
    if usage & STORAGE and size > gpu.max_binding:
        raise BufferTooLarge(
            f"storage buffer {label!r} of {size} B exceeds maxStorageBufferBindingSize {gpu.max_binding}; split it")
    desc = js.Object.new()
    desc.size = size
    desc.usage = usage
    desc.label = label
    return gpu.device.createBuffer(desc)


def storage_buffer(gpu, nbytes: int, label: str = "", extra_usage: int = 0):
    """A storage buffer that can also be written from the CPU and copied from (for readback)."""
    return create_buffer(gpu, nbytes, STORAGE | COPY_DST | COPY_SRC | extra_usage, label)


def uniform_buffer(gpu, data: bytes, label: str = ""):
    """A uniform buffer holding `data` (padded to 16 bytes, the uniform struct alignment)."""
    padded = bytes(data) + b"\0" * (-len(data) % 16)
    buf = create_buffer(gpu, len(padded), UNIFORM | COPY_DST, label)
    write_buffer(gpu, buf, 0, padded)
    return buf


def write_buffer(gpu, buf, offset: int, data) -> None:
    """Copy Python bytes into a GPU buffer (length padded to 4 bytes, as writeBuffer requires)."""
    mv = memoryview(data).cast("B")
    if len(mv) % 4:
        mv = memoryview(bytes(mv) + b"\0" * (-len(mv) % 4))
    for start in range(0, len(mv), UPLOAD_CHUNK):
        gpu.queue.writeBuffer(buf, offset + start, js_bytes(mv[start:start + UPLOAD_CHUNK]))


def write_view(gpu, buf, offset: int, data, start: int = 0, nbytes: int | None = None) -> None:
    """Copy data[start:start + nbytes] (a contiguous Python bytes-like object) into `buf` at `offset` without an
    intermediate JS copy (py_engine/js_programs/write_view.js). nbytes, start and offset must be multiples of 4
    (writeBuffer's rule)."""
    global _write_view
    mv = memoryview(data)
    if not mv.c_contiguous:
        raise ValueError("write_view needs a contiguous buffer (a strided view would be read as if it were not)")
    if nbytes is None:
        nbytes = mv.nbytes - start
    if start < 0 or start + nbytes > mv.nbytes:
        raise ValueError(f"write_view: bytes {start}..{start + nbytes} are outside the {mv.nbytes}-byte buffer")
    if nbytes % 4 or offset % 4:
        raise ValueError(f"write_view needs 4-byte multiples, got offset {offset}, {nbytes} B")
    if nbytes == 0:
        return
    if _write_view is None:
        _write_view = load_program("write_view.js")
    _write_view(gpu.queue, buf, offset, data, start, nbytes)


def write_bytes(gpu, buf, offset: int, data) -> None:
    """Copy a whole bytes-like `data` into `buf` at `offset` (length padded to 4 bytes), one copy for the
    4-byte-aligned part and a padded 4-byte word for any tail, in pieces of UPLOAD_CHUNK (bounds the driver's
    staging memory per call)."""
    n = memoryview(data).nbytes
    whole = n & ~3
    for start in range(0, whole, UPLOAD_CHUNK):
        write_view(gpu, buf, offset + start, data, start, min(UPLOAD_CHUNK, whole - start))
    if whole < n:
        tail = bytes(memoryview(data).cast("B")[whole:]) + b"\0" * (4 - (n - whole))
        gpu.queue.writeBuffer(buf, offset + whole, js_bytes(tail))


def upload(gpu, data, label: str = "", extra_usage: int = 0):
    """A new storage buffer holding `data`."""
    buf = storage_buffer(gpu, len(data), label, extra_usage)
    write_buffer(gpu, buf, 0, data)
    return buf


class Readback:
    """MAP_READ staging buffers reused by size, for copying GPU results back to Python."""

    def __init__(self, gpu):
        self.gpu = gpu
        self._staging = {}

    def staging(self, nbytes: int):
        size = round4(nbytes)
        if size not in self._staging:
            self._staging[size] = create_buffer(self.gpu, size, MAP_READ | COPY_DST, f"staging{size}")
        return self._staging[size]

    async def read(self, buf, offset: int, nbytes: int) -> bytes:
        st = self.staging(nbytes)
        enc = self.gpu.device.createCommandEncoder()
        enc.copyBufferToBuffer(buf, offset, st, 0, round4(nbytes))
        self.gpu.queue.submit(js.Array.of(enc.finish()))
        return await self.map_and_copy(st, nbytes)

    @staticmethod
    async def map_and_copy(st, nbytes: int) -> bytes:
        await st.mapAsync(MAP_READ)
        try:
            return js.Uint8Array.new(st.getMappedRange(0, round4(nbytes))).to_bytes()[:nbytes]
        finally:
            st.unmap()
