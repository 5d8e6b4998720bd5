"""Upload GGUF tensors to the GPU in the kernels' layout.

Q8_0 matrices become two planes (int8 codes, f16 scales; the layout of py_engine.gguf.split_q8_0); F32 tensors go
as stored. A matrix larger than one binding is cut into row bands (the embedding and output head of real models
are), each band its own pair of buffers. Expert tensors ([n_expert, rows, cols]) are one matrix of n_expert * rows
rows: the pool the routed-expert kernel indexes by slot.

Speed: the raw Q8_0 blocks are copied once, from the Python bytes straight into a scratch GPU buffer, and split
there by a kernel (py_engine.gpu.q8_split); F32 tensors are copied once into their buffer. Splitting in Python and
converting to a JS array first cost ~5x more (7.5 s for a 1.3 GB model on lavapipe).

Stacking (`stacked`): matrices that multiply the same input go into one matrix of their summed rows, so the decode
step does one matvec for all of them; each part stays usable alone as a row view (GpuMatrix.row_view).
"""
import array
import asyncio

from py_engine.gguf import GGMLType
from py_engine.gguf.planes import split_q4_0

from ..gpu.buffers import storage_buffer, write_bytes
from ..gpu.kernels import GpuMatrix
from ..gpu.q8_split import DEFAULT_SCRATCH, Q8Splitter

Q8_BLOCK = 34
Q4_BLOCK, Q6K_BLOCK = 18, 210
GPU_FMT = {GGMLType.Q8_0: "q8", GGMLType.F32: "f32"}
# GPU bytes a row of `cols` values takes beyond Q8_0 / F32: Q4_0 as its two planes (split on the CPU: 16 code bytes
# and one f16 scale a block), Q6_K as its raw blocks (weights_q6k.wgsl reads them as stored)
PLANE_ROW_BYTES = {GGMLType.Q4_0: lambda cols: cols // 32 * Q4_BLOCK, GGMLType.Q6_K: lambda cols: cols // 256 * Q6K_BLOCK}


def stack_layout(header, name: str, parts, max_band_bytes: int):
    """(fmt, cols, [(part name, tensor, first row, rows)]) of the stacked matrix `name` of `parts` ([(GGUF name,
    expected shape)], rows in that order; a vector is one row, an expert tensor [n, rows, cols] its n · rows rows).
    ValueError when they cannot share one binding: a type other than Q8_0 / F32, types or widths that differ, more
    bytes than one binding, or a Q8_0 part starting at an odd block (the planes are written two blocks' scales a
    word)."""
    fmt = cols = None
    spans, row = [], 0
    for part, shape in parts:
        t = header.tensor(part)
        if tuple(t.shape) != tuple(shape):
            raise ValueError(f"{part}: shape {t.shape}, expected {shape}")
        if not 1 <= len(t.dims) <= 3 or t.type not in GPU_FMT:
            raise ValueError(f"{name}: {part} ({t.type.name}, {len(t.dims)}-D) cannot be stacked")
        if fmt is not None and (GPU_FMT[t.type], t.dims[0]) != (fmt, cols):
            first = spans[0][1]
            raise ValueError(f"{name}: {part} is {t.type.name} x {t.dims[0]} columns, the parts before it "
                             f"{first.type.name} x {cols}")
        fmt, cols = GPU_FMT[t.type], t.dims[0]
        if fmt == "q8" and row * cols // 32 % 2:
            raise ValueError(f"{name}: {part} would start at an odd Q8_0 block ({row} rows of {cols // 32})")
        rows = t.n_elements // t.dims[0]
        spans.append((part, t, row, rows))
        row += rows
    if not spans:
        raise ValueError(f"{name}: nothing to stack")
    nbytes = row * cols * (1 if fmt == "q8" else 4)
    if nbytes > max_band_bytes:
        raise ValueError(f"{name}: {nbytes} B does not fit one binding ({max_band_bytes} B)")
    return fmt, cols, spans


def stackable(header, name: str, parts, max_band_bytes: int) -> bool:
    """Whether stack_layout accepts `parts`."""
    try:
        stack_layout(header, name, parts, max_band_bytes)
    except ValueError:
        return False
    return True


def stacked_matrix(name, fmt, cols, spans, bufs):
    """The stacked GpuMatrix (one band) over `bufs` and {part name: its row view}."""
    rows = sum(n for _, _, _, n in spans)
    m = GpuMatrix(name, fmt, rows, cols, [(0, rows, bufs)])
    return m, {part: m.row_view(part, r0, n) for part, _, r0, n in spans}


class WeightLoader:
    def __init__(self, gpu, header, source, max_band_bytes: int | None = None, scratch_bytes: int = DEFAULT_SCRATCH,
                 pipelines=None, meter=None):
        self.gpu = gpu
        self.meter = meter  # an UploadMeter (upload_meter.py) told each write, or None
        self.header = header
        self.source = source
        self.max_band_bytes = min(max_band_bytes or gpu.max_binding, gpu.max_binding)
        self.buffers = []  # everything uploaded, so `release` can free it
        self.bytes_uploaded = 0
        self.splitter = Q8Splitter(gpu, pipelines, scratch_bytes)
        self._finish_scheduled = False

    def _buffer(self, nbytes, label):
        buf = storage_buffer(self.gpu, nbytes, label)
        self.buffers.append(buf)
        self.bytes_uploaded += nbytes
        return buf

    def _written(self, nbytes):
        if self.meter is not None:
            self.meter.add(nbytes)

    def _upload(self, data, label):
        buf = self._buffer(len(data), label)
        write_bytes(self.gpu, buf, 0, data)
        self._written(len(data))
        return buf

    def _split_band(self, offset, n_blocks, label):
        """A band of n_blocks Q8_0 blocks at file `offset` as (codes, scales) buffers, split on the GPU."""
        codes = self._buffer(n_blocks * 32, label + ".codes")
        scales = self._buffer(n_blocks * 2, label + ".scales")
        self.splitter.split(lambda b0, n: self.source.read(offset + b0 * Q8_BLOCK, n * Q8_BLOCK),
                            n_blocks, codes, scales, label)
        self._written(n_blocks * Q8_BLOCK)  # 32 code bytes and 2 scale bytes a block
        self._schedule_finish()
        return codes, scales

    def _schedule_finish(self):
        """Free the split scratch once the synchronous `model.load(loader)` has returned: a callback queued on the
        event loop cannot run before then, and every tensor of one load reuses the same scratch meanwhile."""
        if self._finish_scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a plain synchronous caller): `finish` or `release` frees it
        self._finish_scheduled = True
        loop.call_soon(self.finish)

    def finish(self):
        """The load is over: free the split scratch (a later `matrix` makes a new one)."""
        self._finish_scheduled = False
        self.splitter.release()

    def has(self, name: str) -> bool:
        return name in self.header.tensors_by_name

    def vector(self, name: str, expect_len: int | None = None):
        """A 1-D F32 tensor (norm weights) as a storage buffer."""
        t = self.header.tensor(name)
        if t.type != GGMLType.F32:
            raise ValueError(f"{name}: expected an F32 vector, the file has {t.type.name}")
        if expect_len is not None and t.n_elements != expect_len:
            raise ValueError(f"{name}: {t.n_elements} values, expected {expect_len}")
        return self._upload(self.source.read(t.abs_offset, t.nbytes), name)

    def scaled_vector(self, name: str, expect_len: int, factor: float):
        """A 1-D F32 tensor times `factor` (each product rounded to f32) as a storage buffer."""
        t = self.header.tensor(name)
        if t.type != GGMLType.F32 or t.n_elements != expect_len:
            raise ValueError(f"{name}: expected {expect_len} F32 values, the file has {t.n_elements} {t.type.name}")
        values = array.array("f", self.source.read(t.abs_offset, t.nbytes))
        return self._upload(array.array("f", (v * factor for v in values)).tobytes(), name)

    def _plane_bands(self, name, t, cols, rows, single_band):
        """A Q4_0 or Q6_K tensor's row bands: Q4_0 split on the CPU into the nibble and f16-scale planes
        (weights_q4.wgsl), Q6_K as stored (weights_q6k.wgsl); each plane padded to whole words."""
        row_bytes = PLANE_ROW_BYTES[t.type](cols)
        band_rows = max(1, self.max_band_bytes // row_bytes)
        if single_band and band_rows < rows:
            raise ValueError(f"{name}: {rows * row_bytes} B does not fit one binding ({self.max_band_bytes} B)")
        bands = []
        for r0 in range(0, rows, band_rows):
            n = min(band_rows, rows - r0)
            data = self.source.read(t.abs_offset + r0 * row_bytes, n * row_bytes)
            label = f"{name}[{r0}:{r0 + n}]"
            planes = split_q4_0(data) if t.type == GGMLType.Q4_0 else (data,)
            bands.append((r0, n, {3 + i: self._upload(plane + bytes(-len(plane) % 4), label)
                                  for i, plane in enumerate(planes)}))
        return GpuMatrix(name, "q4" if t.type == GGMLType.Q4_0 else "q6k", rows, cols, bands)

    def matrix(self, name: str, expect_shape: tuple | None = None, single_band: bool = False) -> GpuMatrix:
        """A 2-D or 3-D (experts) Q8_0 / F32 / Q4_0 / Q6_K tensor as a GpuMatrix of rows x cols (cols = the contiguous axis)."""
        t = self.header.tensor(name)
        if expect_shape is not None and tuple(t.shape) != tuple(expect_shape):
            raise ValueError(f"{name}: shape {t.shape}, expected {expect_shape}")
        cols = t.dims[0]
        rows = t.n_elements // cols
        if t.type in PLANE_ROW_BYTES:
            return self._plane_bands(name, t, cols, rows, single_band)
        if t.type == GGMLType.Q8_0:
            fmt, row_bytes, gpu_row_bytes = "q8", cols // 32 * Q8_BLOCK, cols
        elif t.type == GGMLType.F32:
            fmt, row_bytes, gpu_row_bytes = "f32", cols * 4, cols * 4
        else:
            raise ValueError(f"{name}: tensor type {t.type.name} is not supported by the engine yet (Q8_0, Q4_0, Q6_K, F32)")
        band_rows = max(1, self.max_band_bytes // gpu_row_bytes)
        if single_band and band_rows < rows:
            raise ValueError(f"{name}: {rows * gpu_row_bytes} B does not fit one binding "
                             f"({self.max_band_bytes} B); it needs the expert streamer's pool")
        bands = []
        for r0 in range(0, rows, band_rows):
            n = min(band_rows, rows - r0)
            offset = t.abs_offset + r0 * row_bytes
            label = f"{name}[{r0}:{r0 + n}]"
            if fmt == "q8":
                codes, scales = self._split_band(offset, n * (cols // 32), label)
                bufs = {3: codes, 4: scales}
            else:
                bufs = {3: self._upload(self.source.read(offset, n * row_bytes), label)}
            bands.append((r0, n, bufs))
        return GpuMatrix(name, fmt, rows, cols, bands)

    def can_stack(self, name: str, parts) -> bool:
        """Whether `stacked(name, parts)` can be made (stack_layout)."""
        return stackable(self.header, name, parts, self.max_band_bytes)

    def stacked(self, name: str, parts):
        """The matrices `parts` ([(GGUF name, expected shape)], same type and width) as one GpuMatrix `name` of
        their rows in order, in one band, and {GGUF name: row view}; ValueError when they cannot be stacked
        (stack_layout says why: load them separately then)."""
        fmt, cols, spans = stack_layout(self.header, name, parts, self.max_band_bytes)
        rows = sum(n for _, _, _, n in spans)
        if fmt == "q8":
            nb = cols // 32
            codes = self._buffer(rows * cols, name + ".codes")
            scales = self._buffer(rows * nb * 2, name + ".scales")
            for part, t, r0, n in spans:
                self.splitter.split(lambda b0, k, at=t.abs_offset: self.source.read(at + b0 * Q8_BLOCK, k * Q8_BLOCK),
                                    n * nb, codes, scales, part, dst_block=r0 * nb)
                self._written(n * nb * Q8_BLOCK)
            self._schedule_finish()
            bufs = {3: codes, 4: scales}
        else:
            buf = self._buffer(rows * cols * 4, name)
            for part, t, r0, n in spans:
                write_bytes(self.gpu, buf, r0 * cols * 4, self.source.read(t.abs_offset, t.nbytes))
                self._written(t.nbytes)
            bufs = {3: buf}
        return stacked_matrix(name, fmt, cols, spans, bufs)

    def release(self):
        self.splitter.release()
        for b in self.buffers:
            b.destroy()
        self.buffers.clear()
