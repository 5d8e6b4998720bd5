"""Weights from a model store (py_engine/store: header.bin, dense.bin, experts.bin, manifest.json) to the GPU.

The store already holds every Q8_0 tensor as a code plane and an f16-scale plane, which is exactly what the kernels
bind (weights_q8.wgsl), so dense planes are copied as they are: no re-splitting. Reading goes through a store
*sink* (`await sink.read(file, offset, n)`): `DirectorySink` on a local folder (CPython, Node with the folder
mounted), `OPFSSink` in the browser. Model files' `load(loader)` is synchronous, so `StoreWeightLoader` creates the
GPU buffers during `load` and records what fills them; `await loader.fill()` then reads the planes (asynchronously,
in chunks) and uploads them.

Routed-expert tensors are not uploaded here: `matrix()` returns a `PoolPart` naming the part (gate/up/down) of
the store record; the expert pool (expert_pool.py) pages records into GPU slots and its kernels read the part.
"""
import array
import asyncio
import json
import re

from ..gguf import GGMLType
from ..gguf.reader import parse_header
from ..gpu.buffers import storage_buffer, write_bytes
from ..gpu.kernels import GpuMatrix
from .gpu_weights import stack_layout, stackable, stacked_matrix
from ..store.layout import DENSE_FILE, EXPERTS_FILE, HEADER_FILE, MANIFEST_FILE, RECORD_PLANES

READ_CHUNK = 8 << 20  # dense planes are read and uploaded in pieces of this size (bounded Python memory)
_EXPERT_TENSOR = re.compile(r"^blk\.(\d+)\.ffn_(gate_up|gate|up|down)_exps\.weight$")
STORE_FMT = {GGMLType.Q8_0: "q8", GGMLType.F32: "f32", GGMLType.Q4_0: "q4", GGMLType.Q6_K: "q6k"}


class StoreNotReady(ValueError):
    """The folder is not a complete model store (missing manifest, ingest unfinished or failed)."""


async def open_store(sink):
    """(manifest, GGUF header) of a complete store; raises StoreNotReady otherwise."""
    raw = await sink.get(MANIFEST_FILE)
    if raw is None:
        raise StoreNotReady(f"no {MANIFEST_FILE}: not a model store (run the ingest first)")
    manifest = json.loads(raw)
    state = manifest.get("state", {})
    if state.get("failed"):
        raise StoreNotReady(f"the store's ingest failed ({state['failed']}); ingest the model again")
    if not state.get("complete"):
        raise StoreNotReady(f"the store is incomplete (ingested up to byte {state.get('next_offset')} of "
                            f"{manifest.get('source', {}).get('size')}); resume the ingest first")
    size = manifest["layout"]["header_size"]
    header = parse_header(await sink.read(HEADER_FILE, 0, size))
    return manifest, header


class PoolPart:
    """One part (gate, up or down) of the routed experts of one layer, as the streamed pool holds it: `rows` x
    `cols` per expert, its codes / scales at byte offsets inside a record (GpuMatrix-like: name, fmt, rows, cols)."""

    def __init__(self, name, layer, part, fmt, rows, cols, codes_off, scales_off):
        self.name, self.layer, self.part, self.fmt = name, layer, part, fmt
        self.rows, self.cols = rows, cols
        self.codes_off, self.scales_off = codes_off, scales_off
        self.bands = []


class StoreWeightLoader:
    """The WeightLoader interface (has / vector / matrix / release / bytes_uploaded) over a store's dense planes."""

    def __init__(self, gpu, manifest, header, sink, max_band_bytes=None):
        self.gpu, self.manifest, self.header, self.sink = gpu, manifest, header, sink
        self.max_band_bytes = min(max_band_bytes or gpu.max_binding, gpu.max_binding)
        lay = manifest["layout"]
        self.planes = {}
        for p in lay["dense"]["planes"]:
            self.planes.setdefault(p["tensor"], {})[p["kind"]] = p
        self.experts = lay["experts"]
        self.buffers = []
        self._fills = []  # (buffer, file, offset, nbytes, offset in the buffer)
        self.bytes_uploaded = 0
        self.bytes_planned = 0
        self.on_demand = {}  # tensor name -> what stands for it instead of its planes (embedding_rows.py)

    def has(self, name: str) -> bool:
        return name in self.header.tensors_by_name

    def _buffer(self, nbytes, label, src_offset, transform=None):
        return self._filled_buffer(nbytes, label, [(src_offset, nbytes, 0)], transform)

    def _filled_buffer(self, nbytes, label, pieces, transform=None):
        """A buffer of nbytes filled by `fill` from dense.bin's (source offset, bytes, offset in the buffer), each
        piece's bytes through `transform` first where one is given."""
        buf = storage_buffer(self.gpu, nbytes, label)
        self.buffers.append(buf)
        self._fills += [(buf, DENSE_FILE, src, n, dst, transform) for src, n, dst in pieces]
        self.bytes_planned += nbytes
        return buf

    def _plane(self, name, kind):
        try:
            return self.planes[name][kind]
        except KeyError:
            raise ValueError(f"{name}: the store has no {kind} plane for it") from None

    async def values(self, name: str) -> list:
        """An F32 tensor's values read from the store (no GPU buffer): small vectors the CPU needs too."""
        t = self.header.tensor(name)
        if t.type != GGMLType.F32:
            raise ValueError(f"{name}: expected F32 values, the store has {t.type.name}")
        p = self._plane(name, "raw")
        data = await self.sink.read(DENSE_FILE, p["offset"], p["nbytes"])
        if len(data) != p["nbytes"]:
            raise OSError(f"{DENSE_FILE}: short read of {name}; the store is damaged, verify or ingest it again")
        return list(memoryview(bytes(data)).cast("f"))

    def vector(self, name: str, expect_len=None):
        t = self.header.tensor(name)
        if t.type != GGMLType.F32:
            raise ValueError(f"{name}: expected an F32 vector, the store has {t.type.name}")
        if expect_len is not None and t.n_elements != expect_len:
            raise ValueError(f"{name}: {t.n_elements} values, expected {expect_len}")
        p = self._plane(name, "raw")
        return self._buffer(p["nbytes"], name, p["offset"])

    def scaled_vector(self, name: str, expect_len: int, factor: float):
        """A 1-D F32 tensor times `factor` (each product rounded to f32), as WeightLoader.scaled_vector."""
        t = self.header.tensor(name)
        if t.type != GGMLType.F32 or t.n_elements != expect_len:
            raise ValueError(f"{name}: expected {expect_len} F32 values, the store has {t.n_elements} {t.type.name}")
        p = self._plane(name, "raw")

        def scaled(data):
            values = array.array("f", bytes(data))
            return array.array("f", (v * factor for v in values)).tobytes()
        return self._buffer(p["nbytes"], name, p["offset"], scaled)

    def matrix(self, name: str, expect_shape=None, single_band: bool = False):
        t = self.header.tensor(name)
        if expect_shape is not None and tuple(t.shape) != tuple(expect_shape):
            raise ValueError(f"{name}: shape {t.shape}, expected {expect_shape}")
        if name in self.on_demand:
            return self.on_demand[name]
        cols = t.dims[0]
        fmt = STORE_FMT.get(t.type)
        if fmt is None:
            raise ValueError(f"{name}: tensor type {t.type.name} is not supported by the engine yet (Q8_0, Q4_0, "
                             "Q6_K, F32)")
        m = _EXPERT_TENSOR.match(name)
        if m:
            return self._pool_part(name, int(m.group(1)), m.group(2), fmt, t)
        rows = t.n_elements // cols
        nb = cols // 32
        gpu_row_bytes = {"q8": cols, "q4": cols // 2, "q6k": cols // 256 * 210}.get(fmt, 4 * cols)
        band_rows = max(1, self.max_band_bytes // gpu_row_bytes)
        if fmt == "q6k":
            band_rows -= band_rows % 2  # whole 4-byte words per band (a row is 210 bytes a block)
        if single_band and band_rows < rows:
            raise ValueError(f"{name}: {rows * gpu_row_bytes} B does not fit one binding ({self.max_band_bytes} B)")
        bands = []
        for r0 in range(0, rows, band_rows):
            n = min(band_rows, rows - r0)
            label = f"{name}[{r0}:{r0 + n}]"
            if fmt in ("q8", "q4"):
                codes, scales = self._plane(name, "codes"), self._plane(name, "scales")
                row = gpu_row_bytes
                bufs = {3: self._buffer(n * row, label + ".codes", codes["offset"] + r0 * row),
                        4: self._buffer(_words(2 * n * nb), label + ".scales", scales["offset"] + 2 * r0 * nb)}
            elif fmt == "q6k":
                raw = self._plane(name, "raw")
                bufs = {3: self._buffer(_words(n * gpu_row_bytes), label, raw["offset"] + r0 * gpu_row_bytes)}
            else:
                raw = self._plane(name, "raw")
                bufs = {3: self._buffer(4 * n * cols, label, raw["offset"] + 4 * r0 * cols)}
            bands.append((r0, n, bufs))
        return GpuMatrix(name, fmt, rows, cols, bands)

    def can_stack(self, name: str, parts) -> bool:
        """Whether `stacked(name, parts)` can be made: stack_layout's conditions, and every part a dense plane of the
        store (an expert tensor is records, streamed into the pool)."""
        return (stackable(self.header, name, parts, self.max_band_bytes)
                and all(part in self.planes for part, _ in parts))

    def stacked(self, name: str, parts):
        """As WeightLoader.stacked: one GpuMatrix of the parts' rows (their planes copied side by side) and
        {GGUF name: row view}; ValueError when they cannot be stacked."""
        fmt, cols, spans = stack_layout(self.header, name, parts, self.max_band_bytes)
        rows = sum(n for _, _, _, n in spans)
        nb = cols // 32
        if fmt == "q8":  # stack_layout keeps each part's planes 4-byte aligned (even block starts)
            codes = [(self._plane(part, "codes")["offset"], n * cols, r0 * cols) for part, _, r0, n in spans]
            scales = [(self._plane(part, "scales")["offset"], 2 * n * nb, 2 * r0 * nb) for part, _, r0, n in spans]
            bufs = {3: self._filled_buffer(rows * cols, name + ".codes", codes),
                    4: self._filled_buffer(2 * rows * nb, name + ".scales", scales)}
        else:
            raw = [(self._plane(part, "raw")["offset"], 4 * n * cols, 4 * r0 * cols) for part, _, r0, n in spans]
            bufs = {3: self._filled_buffer(4 * rows * cols, name, raw)}
        return stacked_matrix(name, fmt, cols, spans, bufs)

    def _pool_part(self, name, layer, part, fmt, t):
        ex = self.experts
        if ex is None or layer not in ex["layers"]:
            raise ValueError(f"{name}: the store has no expert records for layer {layer}")
        planes = ex["planes"]
        if part == "gate_up":
            # gemma4's fused tensor: the record's gate and up sub-planes, read as one matrix of both halves' rows
            # where each half's codes (and scales) end where the up half's begin
            if any(planes[f"gate_{k}"][0] + planes[f"gate_{k}"][1] != planes[f"up_{k}"][0]
                   for k in ("codes", "scales") if planes[f"up_{k}"][1]):
                raise ValueError(f"{name}: the store's gate and up sub-planes are not adjacent")
            part = "gate"
        want = GGMLType(ex["types"][part])
        if want != t.type:
            raise ValueError(f"{name}: record type {want.name} differs from the header's {t.type.name}")
        if t.dims[2] != ex["n_experts"]:
            raise ValueError(f"{name}: {t.dims[2]} experts, the store's records hold {ex['n_experts']}")
        return PoolPart(name, layer, part, fmt, t.dims[1], t.dims[0], planes[f"{part}_codes"][0],
                        planes[f"{part}_scales"][0])

    async def fill(self, chunk=READ_CHUNK, meter=None):
        """Read every planned plane from the store and upload it (in chunks of at most `chunk` bytes); `meter`: an
        UploadMeter (upload_meter.py) told each chunk."""
        chunk -= chunk % 4
        for buf, file, offset, nbytes, dst, transform in self._fills:
            for start in range(0, nbytes, chunk):
                n = min(chunk, nbytes - start)
                data = await self.sink.read(file, offset + start, n)
                if len(data) != n:
                    raise OSError(f"{file}: short read at {offset + start} ({len(data)} of {n} B); the store is "
                                  f"damaged, verify or ingest it again")
                if transform is not None:
                    data = transform(data)
                write_bytes(self.gpu, buf, dst + start, data)  # no to_js copy: a view onto the read bytes
                self.bytes_uploaded += n
                if meter is not None:
                    meter.add(n)
        self._fills.clear()

    def release(self):
        for b in self.buffers:
            b.destroy()
        self.buffers.clear()


def _words(nbytes: int) -> int:
    """nbytes rounded up to whole 4-byte words (a plane's GPU buffer; the store pads every plane to 256)."""
    return (nbytes + 3) & ~3


def dense_gpu_bytes(manifest) -> int:
    """Bytes of GPU buffers the dense planes take (every plane of dense.bin, each rounded to 4 bytes)."""
    return sum((p["nbytes"] + 3) & ~3 for p in manifest["layout"]["dense"]["planes"])


class StoreRecordReader:
    """The streamer's reader: `await read_record(layer, expert)` -> one record of experts.bin through a sink."""

    def __init__(self, sink, manifest):
        ex = manifest["layout"]["experts"]
        if not ex:
            raise ValueError("the store holds no routed experts")
        self.sink = sink
        self.n_experts = ex["n_experts"]
        self.record_size = ex["record_size"]
        self.reads = 0

    def offset(self, layer: int, expert: int) -> int:
        return (layer * self.n_experts + expert) * self.record_size

    async def read_record(self, layer: int, expert: int):
        data = await self.sink.read(EXPERTS_FILE, self.offset(layer, expert), self.record_size)
        self.reads += 1
        return data


class ReaderPoolRecordReader:
    """The browser's reader: records through `py_engine.store.reader_pool.ReaderPool` (workers with read-only OPFS
    sync handles on experts.bin), handed over as JS Uint8Arrays ready for the staging ring."""

    def __init__(self, pool, manifest):
        ex = manifest["layout"]["experts"]
        self.pool = pool
        self.n_experts = ex["n_experts"]
        self.record_size = ex["record_size"]

    async def read_record(self, layer: int, expert: int):
        return await self.pool.read_js((layer * self.n_experts + expert) * self.record_size, self.record_size)

    async def read_records(self, layer: int, experts) -> list:
        """Several records at once, spread over the pool's workers (each reply resolves a Python future: no JS
        promise is awaited per record)."""
        return await asyncio.gather(*(self.read_record(layer, e) for e in experts))

    def release(self):
        self.pool.terminate()


__all__ = ["StoreNotReady", "open_store", "PoolPart", "StoreWeightLoader", "StoreRecordReader",
           "ReaderPoolRecordReader", "dense_gpu_bytes", "RECORD_PLANES"]
