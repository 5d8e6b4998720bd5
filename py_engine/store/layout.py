"""The store layout planned from a parsed GGUF header: where every byte of the source goes.

A model folder holds `header.bin` (source bytes [0, data_offset)), `dense.bin` (every non-expert tensor, one plane
per tensor, or two for Q8_0/Q4_0: codes and f16 scales, each plane 256-byte aligned) and `experts.bin` (one
fixed-size record per (layer, expert) at (layer * E + e) * record_size). A record holds, each sub-plane 256-byte
aligned: gate codes, up codes (together: gate‖up codes), gate scales, up scales, down codes, down scales. An expert
tensor whose type does not split (F32, F16, Q6_K, ...) keeps its raw bytes in the "codes" sub-plane and has an
empty "scales" sub-plane. A fused gate|up tensor (gemma4's ffn_gate_up_exps) fills the gate and up sub-planes
from each expert's two halves (fused_experts.py).

`plan_units` turns the layout into the ingest work list: units in source-file order that cover the whole file
[0, size) without gaps, each at most `chunk_bytes` long and cut only at block boundaries, so the source is read
once, front to back, and every unit can be transformed on its own. Bytes between tensors (alignment padding) are
covered by units but go nowhere; the ingest engine keeps any that are not zero so the source can be rebuilt.
"""
import re

from ..gguf.types import BLOCK_LAYOUTS, GGMLType
from .fused_experts import fused_gate_up_halves

ALIGN = 256
FORMAT_VERSION = 1

HEADER_FILE = "header.bin"
DENSE_FILE = "dense.bin"
EXPERTS_FILE = "experts.bin"
MANIFEST_FILE = "manifest.json"

# Types split into a code plane and a scale plane: (block bytes, scale bytes at the block's start, code bytes).
SPLIT_TYPES = {
    GGMLType.Q8_0: (34, 2, 32),
    GGMLType.Q4_0: (18, 2, 16),
}
EXPERT_PARTS = ("gate", "up", "down")
# Order of the sub-planes inside one expert record.
RECORD_PLANES = ("gate_codes", "up_codes", "gate_scales", "up_scales", "down_codes", "down_scales")
_EXPERT_NAME = re.compile(r"^blk\.(\d+)\.ffn_(gate|up|down)_exps\.weight$")


class StoreLayoutError(ValueError):
    """The GGUF's tensors cannot be laid out as a store (inconsistent experts, odd sizes)."""


def align_up(n: int, a: int = ALIGN) -> int:
    return (n + a - 1) // a * a


def block_bytes(ggml_type) -> int:
    """Bytes of one block of the type: the unit at which a tensor's bytes may be cut between units."""
    return BLOCK_LAYOUTS[GGMLType(ggml_type)][1]


def _split_sizes(ggml_type, nbytes: int):
    """(code bytes, scale bytes) of `nbytes` of the type; (nbytes, 0) when the type is stored raw."""
    split = SPLIT_TYPES.get(ggml_type)
    if split is None:
        return nbytes, 0
    blk, sb, cb = split
    if nbytes % blk:
        raise StoreLayoutError(f"{nbytes} bytes of {GGMLType(ggml_type).name} are not whole blocks")
    n = nbytes // blk
    return n * cb, n * sb


class DensePlane:
    """One plane of dense.bin: a tensor's codes, scales, or raw bytes."""
    __slots__ = ("tensor", "kind", "type", "dims", "offset", "nbytes", "src_offset", "src_nbytes")

    def __init__(self, tensor, kind, ggml_type, dims, offset, nbytes, src_offset, src_nbytes):
        self.tensor, self.kind, self.type, self.dims = tensor, kind, int(ggml_type), list(dims)
        self.offset, self.nbytes, self.src_offset, self.src_nbytes = offset, nbytes, src_offset, src_nbytes

    @property
    def key(self) -> str:
        return f"{self.tensor}:{self.kind}"

    def to_json(self) -> dict:
        return {s: getattr(self, s) for s in self.__slots__}


class ExpertLayout:
    """The fixed record of one (layer, expert): sub-plane offsets and sizes, shared by every layer."""

    def __init__(self, n_experts, layers, types, dims, planes, record_size):
        self.n_experts = n_experts
        self.layers = layers              # block numbers that have routed experts
        self.types = types                # part -> ggml type id
        self.dims = dims                  # part -> GGUF dims of one expert's matrix [in, out]
        self.planes = planes              # sub-plane name -> (offset in record, nbytes)
        self.record_size = record_size

    @property
    def n_layers(self) -> int:
        return (max(self.layers) + 1) if self.layers else 0

    def record_offset(self, layer: int, expert: int) -> int:
        return (layer * self.n_experts + expert) * self.record_size

    def to_json(self) -> dict:
        return {"n_experts": self.n_experts, "layers": self.layers, "types": self.types, "dims": self.dims,
                "planes": {k: list(v) for k, v in self.planes.items()}, "record_size": self.record_size,
                "file_size": self.n_layers * self.n_experts * self.record_size}


def record_layout(types: dict, expert_nbytes: dict):
    """Sub-plane offsets of a record from each part's type and per-expert byte count."""
    planes, off = {}, 0
    sizes = {p: _split_sizes(types[p], expert_nbytes[p]) for p in EXPERT_PARTS}
    for name in RECORD_PLANES:
        part, kind = name.split("_")
        n = sizes[part][0 if kind == "codes" else 1]
        planes[name] = (off, n)
        off = align_up(off + n)
    return planes, off


class StoreLayout:
    """dense.bin planes and experts.bin records planned from a GGUF header."""

    def __init__(self, header):
        self.header_size = header.data_offset
        self.dense = []                   # DensePlane, in source order
        self.dense_by_tensor = {}         # tensor name -> [DensePlane] (codes first)
        self.experts = None
        expert_tensors = {}
        off = 0
        for t in sorted(header.tensors, key=lambda t: t.abs_offset):
            halves = fused_gate_up_halves(t)
            if halves:
                expert_tensors.update(halves)
                continue
            m = _EXPERT_NAME.match(t.name)
            if m:
                expert_tensors[(int(m.group(1)), m.group(2))] = t
                continue
            codes, scales = _split_sizes(t.type, t.nbytes)
            kinds = [("codes", codes), ("scales", scales)] if scales else [("raw", codes)]
            for kind, n in kinds:
                p = DensePlane(t.name, kind, t.type, t.dims, off, n, t.abs_offset, t.nbytes)
                self.dense.append(p)
                self.dense_by_tensor.setdefault(t.name, []).append(p)
                off = align_up(off + n)
        self.dense_size = off
        self.expert_tensors = expert_tensors
        if expert_tensors:
            self.experts = self._plan_experts(expert_tensors)

    @staticmethod
    def _plan_experts(found: dict) -> ExpertLayout:
        layers = sorted({l for l, _ in found})
        ref = None
        for l in layers:
            parts = {p: found.get((l, p)) for p in EXPERT_PARTS}
            missing = [p for p, t in parts.items() if t is None]
            if missing:
                raise StoreLayoutError(f"layer {l} has expert tensors but lacks ffn_{'/'.join(missing)}_exps")
            sig = {}
            for p, t in parts.items():
                if len(t.dims) != 3:
                    raise StoreLayoutError(f"{t.name} has dims {list(t.dims)}, expected [in, out, experts]")
                n_exp = t.dims[2]
                if t.nbytes % n_exp:
                    raise StoreLayoutError(f"{t.name}: {t.nbytes} bytes do not divide into {n_exp} experts")
                sig[p] = (int(t.type), list(t.dims[:2]), n_exp, t.nbytes // n_exp)
            if len({s[2] for s in sig.values()}) != 1:
                raise StoreLayoutError(f"layer {l}: gate/up/down disagree on the expert count")
            if ref is None:
                ref = sig
            elif sig != ref:
                raise StoreLayoutError(f"layer {l}'s expert tensors differ from layer {layers[0]}'s: {sig} vs {ref}")
        types = {p: ref[p][0] for p in EXPERT_PARTS}
        planes, size = record_layout(types, {p: ref[p][3] for p in EXPERT_PARTS})
        return ExpertLayout(ref["gate"][2], layers, types, {p: ref[p][1] for p in EXPERT_PARTS}, planes, size)

    def to_json(self) -> dict:
        return {"alignment": ALIGN, "header_size": self.header_size,
                "dense": {"size": self.dense_size, "planes": [p.to_json() for p in self.dense]},
                "experts": self.experts.to_json() if self.experts else None}


# ---- the ingest work list ----------------------------------------------------------------------------------------

class Op:
    """Source bytes [src, src + n) go to `dst` = [(file, offset, checksum key), ...]: one target for a copy,
    (codes target, scales target) for a split."""
    __slots__ = ("src", "n", "split", "dst")

    def __init__(self, src, n, split, dst):
        self.src, self.n, self.split, self.dst = src, n, split, dst

    def __repr__(self):
        return f"Op({self.src}+{self.n} {self.split and GGMLType(self.split).name or 'copy'} -> {self.dst})"


class Unit:
    """One sequential read of the source, [start, end), and the ops it feeds."""
    __slots__ = ("start", "end", "ops")

    def __init__(self, start, end, ops):
        self.start, self.end, self.ops = start, end, ops

    def __repr__(self):
        return f"Unit({self.start}..{self.end}, {len(self.ops)} ops)"


def record_key(layout: ExpertLayout, layer: int, expert: int, plane: str) -> int:
    """Index of a record sub-plane's checksum in the flat per-record checksum list."""
    li = layout.layers.index(layer)
    return (li * layout.n_experts + expert) * len(RECORD_PLANES) + RECORD_PLANES.index(plane)


def _segments(layout: StoreLayout):
    """(src, n, block, split type, dst) for every destination range, in source order."""
    yield 0, layout.header_size, 1, None, [(HEADER_FILE, 0, "header")]
    for p in layout.dense:
        if p.kind == "scales":
            continue  # emitted with its codes
        split = int(p.type) if p.type in SPLIT_TYPES else None
        dst = [(DENSE_FILE, q.offset, q.key) for q in layout.dense_by_tensor[p.tensor]]
        yield p.src_offset, p.src_nbytes, block_bytes(p.type), split, dst
    ex = layout.experts
    if ex is None:
        return
    for (l, part), t in layout.expert_tensors.items():
        per = t.nbytes // ex.n_experts
        stride = getattr(t, "expert_stride", per)  # a fused gate|up half: its experts lie further apart
        ttype = int(t.type)
        split = ttype if ttype in SPLIT_TYPES else None
        for e in range(ex.n_experts):
            rec = ex.record_offset(l, e)
            names = [f"{part}_codes", f"{part}_scales"] if split else [f"{part}_codes"]
            dst = [(EXPERTS_FILE, rec + ex.planes[nm][0], record_key(ex, l, e, nm)) for nm in names]
            yield t.abs_offset + e * stride, per, block_bytes(ttype), split, dst


def _advance(dst, split, nbytes):
    """Destinations of the rest of a segment after its first `nbytes` source bytes."""
    if split is None:
        f, o, k = dst[0]
        return [(f, o + nbytes, k)]
    blk, sb, cb = SPLIT_TYPES[split]
    nb = nbytes // blk
    (fc, oc, kc), (fs, os_, ks) = dst
    return [(fc, oc + nb * cb, kc), (fs, os_ + nb * sb, ks)]


def plan_units(layout: StoreLayout, file_size: int, chunk_bytes: int):
    """The ingest work list: units covering [0, file_size) in order, each <= chunk_bytes, cut at block bounds."""
    segs = sorted(_segments(layout), key=lambda s: s[0])
    units, ops, start, pos = [], [], 0, 0

    def close(end):
        nonlocal ops, start
        units.append(Unit(start, end, ops))
        ops, start = [], end

    for src, n, blk, split, dst in segs:
        if src < pos:
            raise StoreLayoutError(f"tensor data overlaps at source offset {src}")
        if src + n > file_size:
            raise StoreLayoutError(f"tensor data [{src}, {src + n}) runs past the end of the {file_size}-byte file")
        if blk > chunk_bytes:
            raise StoreLayoutError(f"chunk of {chunk_bytes} bytes is smaller than a {blk}-byte block")
        while pos < src:  # padding between tensors
            step = min(src - pos, start + chunk_bytes - pos)
            pos += step
            if pos - start == chunk_bytes:
                close(pos)
        while n > 0:
            room = (start + chunk_bytes - src) // blk * blk
            if room == 0:
                close(src)
                continue
            take = min(n, room)
            ops.append(Op(src, take, split, dst))
            src, n, pos = src + take, n - take, src + take
            dst = _advance(dst, split, take)
            if pos - start == chunk_bytes:
                close(pos)
    while pos < file_size:  # trailing padding
        step = min(file_size - pos, start + chunk_bytes - pos)
        pos += step
        if pos - start == chunk_bytes:
            close(pos)
    if pos > start or not units:
        close(pos)
    return units
