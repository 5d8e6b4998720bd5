"""Sans-IO GGUF header parser: bytes in, `GGUFHeader` out, `NeedMoreBytes` when the prefix is too short.

Layout (GGUF v2/v3; v1 used 32-bit counts and lengths and is refused):
  magic "GGUF" | u32 version | u64 tensor_count | u64 kv_count | kv_count x (string key, u32 type, value)
  | tensor_count x (string name, u32 n_dims, n_dims x u64 ne, u32 ggml type, u64 offset) | pad to alignment | data
Strings are a u64 byte length then UTF-8 bytes; arrays are a u32 element type, a u64 count, then the elements.
v3 files may be big-endian: the version then reads as a number whose low 16 bits are zero.

Safety: every declared count or length is checked against the bytes that can still follow (the file size when
known, else the buffer) before anything is allocated for it, so a hostile header can neither exhaust memory nor
loop for long: each item consumed takes at least one byte of the input.
"""
import struct

from .errors import GGUFError, NeedMoreBytes, TruncatedGGUF
from .header import GGUFHeader, TensorInfo
from .types import (GGMLType, GGUFValueType, MIN_ARRAY_BYTES, MIN_STRING_BYTES, SCALAR_FORMATS, SCALAR_SIZES,
                    ggml_type_name, tensor_nbytes)

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_ARRAY_DEPTH = 8  # arrays of arrays nest at most this deep
# Smallest tensor info: empty name (u64 length), u32 n_dims = 0, u32 type, u64 offset.
MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8
# Smallest key/value pair: empty key, u32 type, a one-byte value.
MIN_KV_BYTES = 8 + 4 + 1
_MAX_INT64 = (1 << 63) - 1


def _show(name: str) -> str:
    """A key or tensor name for a message; a hostile file's names can be megabytes long."""
    return repr(name) if len(name) <= 80 else f"{name[:80]!r}... ({len(name)} characters)"


class _Cursor:
    """A read position in a prefix of the file, with bounds checks that tell truncation from a short prefix."""

    def __init__(self, buf, file_size):
        self.buf = buf
        self.pos = 0
        self.file_size = file_size
        self.set_order("<")

    def set_order(self, order: str):
        self.order = order
        self._u32 = struct.Struct(order + "I").unpack_from
        self._u64 = struct.Struct(order + "Q").unpack_from

    def need(self, n: int, what: str):
        """Make sure n fixed-size bytes for `what` are in the buffer at pos."""
        end = self.pos + n
        if end > len(self.buf):
            if self.file_size is not None and end > self.file_size:
                raise TruncatedGGUF(f"truncated GGUF: the file ends at byte {self.file_size} while reading "
                                    f"{what} at offset {self.pos} ({n} bytes)")
            raise NeedMoreBytes(end)

    def check_declared(self, count: int, unit_bytes: int, what: str):
        """A declared length/count of items of at least unit_bytes each must fit in what remains of the input."""
        end = self.pos + count * unit_bytes
        if self.file_size is not None and end > self.file_size:
            left = max(self.file_size - self.pos, 0)
            raise GGUFError(f"{what} declares {count} {'bytes' if unit_bytes == 1 else 'items'} at offset "
                            f"{self.pos}, but only {left} bytes remain in the file")
        if end > len(self.buf):
            raise NeedMoreBytes(end)

    def u32(self, what: str) -> int:
        self.need(4, what)
        (v,) = self._u32(self.buf, self.pos)
        self.pos += 4
        return v

    def u64(self, what: str) -> int:
        self.need(8, what)
        (v,) = self._u64(self.buf, self.pos)
        self.pos += 8
        return v

    def string(self, what: str) -> str:
        n = self.u64(f"the length of {what}")
        self.check_declared(n, 1, what)
        start = self.pos
        self.pos += n
        # surrogateescape: a vocabulary may hold bytes that are not UTF-8; they survive as lone surrogates and
        # .encode("utf-8", "surrogateescape") gives back the stored bytes exactly.
        return self.buf[start:self.pos].decode("utf-8", "surrogateescape")


def parse_header(buf, file_size: "int | None" = None) -> GGUFHeader:
    """Parse the GGUF header at the start of `buf` (a prefix of the file, or all of it).

    Raises NeedMoreBytes(n) when the header continues past the end of `buf` (fetch the first n bytes or more and
    call again), GGUFError when the bytes are not a valid GGUF. With `file_size` known, lengths that run past the
    end of the file are errors rather than requests, and tensors are checked to lie inside the file.
    """
    if not isinstance(buf, (bytes, bytearray)):
        buf = bytes(buf)
    cur = _Cursor(buf, file_size)
    version = _read_preamble(cur)
    tensor_count = cur.u64("the tensor count")
    kv_count = cur.u64("the metadata key/value count")
    cur.check_declared(kv_count, MIN_KV_BYTES, "the metadata key/value count")
    metadata, metadata_types = _read_metadata(cur, kv_count)
    alignment = _alignment(metadata, metadata_types)
    cur.check_declared(tensor_count, MIN_TENSOR_INFO_BYTES, "the tensor count")
    raw_infos = [_read_tensor_info(cur, i) for i in range(tensor_count)]
    data_offset = -(-cur.pos // alignment) * alignment
    tensors = _place_tensors(raw_infos, data_offset, alignment, file_size)
    return GGUFHeader(version=version, byte_order=cur.order, metadata=metadata, metadata_types=metadata_types,
                      tensors=tensors, alignment=alignment, data_offset=data_offset, file_size=file_size)


def _read_preamble(cur: _Cursor) -> int:
    cur.need(4, "the magic")
    magic = bytes(cur.buf[0:4])
    if magic != GGUF_MAGIC:
        raise GGUFError(f"not a GGUF file: the first 4 bytes are {magic!r} (hex {magic.hex(' ')}), "
                        f"expected {GGUF_MAGIC!r}")
    cur.pos = 4
    version = cur.u32("the version")
    if version & 0xFFFF == 0 and version:
        # A big-endian file: its version (small) reads with the low 16 bits zero in little-endian order.
        cur.set_order(">")
        version = int.from_bytes(cur.buf[4:8], "big")
    if version == 1:
        raise GGUFError("GGUF version 1 is not supported (it used 32-bit counts and lengths); "
                        "re-convert the model with a current llama.cpp")
    if version not in SUPPORTED_VERSIONS:
        raise GGUFError(f"unsupported GGUF version {version}: this reader handles versions 2 and 3")
    return version


def _read_metadata(cur: _Cursor, kv_count: int):
    metadata, types = {}, {}
    for i in range(kv_count):
        key = cur.string(f"metadata key #{i}")
        if key in metadata:
            raise GGUFError(f"metadata key {_show(key)} appears twice")
        raw_type = cur.u32(f"the value type of metadata key {_show(key)}")
        vtype = _value_type(raw_type, f"metadata key {_show(key)} has unknown value type {raw_type}")
        if vtype == GGUFValueType.ARRAY:
            value, elem_type = _read_array(cur, key, 1)
            types[key] = (vtype, elem_type)
        else:
            value = _read_value(cur, vtype, key)
            types[key] = (vtype,)
        metadata[key] = value
    return metadata, types


def _value_type(raw: int, message: str) -> GGUFValueType:
    try:
        return GGUFValueType(raw)
    except ValueError:
        raise GGUFError(f"{message} (known types are 0-12)") from None


def _read_value(cur: _Cursor, vtype: GGUFValueType, key: str):
    if vtype == GGUFValueType.STRING:
        return cur.string(f"the string value of {_show(key)}")
    size = SCALAR_SIZES[vtype]
    cur.need(size, f"the value of {_show(key)}")
    (v,) = struct.unpack_from(cur.order + SCALAR_FORMATS[vtype], cur.buf, cur.pos)
    cur.pos += size
    if vtype == GGUFValueType.BOOL:
        return _as_bool(v, key)
    return v


def _as_bool(v: int, key: str) -> bool:
    if v > 1:
        raise GGUFError(f"metadata key {_show(key)} holds a bool of value {v}; GGUF bools are 0 or 1")
    return v == 1


def _read_array(cur: _Cursor, key: str, depth: int):
    """Returns (list of values, element type)."""
    if depth > MAX_ARRAY_DEPTH:
        raise GGUFError(f"metadata key {_show(key)} nests arrays deeper than {MAX_ARRAY_DEPTH} levels")
    raw = cur.u32(f"the element type of array {_show(key)}")
    elem = _value_type(raw, f"array {_show(key)} has unknown element type {raw}")
    n = cur.u64(f"the length of array {_show(key)}")
    if elem == GGUFValueType.STRING:
        cur.check_declared(n, MIN_STRING_BYTES, f"array {_show(key)}")
        return _read_string_array(cur, n, key), elem
    if elem == GGUFValueType.ARRAY:
        cur.check_declared(n, MIN_ARRAY_BYTES, f"array {_show(key)}")
        return [_read_array(cur, key, depth + 1)[0] for _ in range(n)], elem
    size = SCALAR_SIZES[elem]
    cur.check_declared(n, size, f"array {_show(key)}")
    values = list(struct.unpack_from(f"{cur.order}{n}{SCALAR_FORMATS[elem]}", cur.buf, cur.pos))
    cur.pos += n * size
    if elem == GGUFValueType.BOOL:
        values = [_as_bool(v, key) for v in values]
    return values, elem


def _read_string_array(cur: _Cursor, n: int, key: str) -> list:
    """The hot loop of a vocabulary (hundreds of thousands of strings): bounds are checked inline, and only a
    string that does not fit goes through Cursor.string, which raises the precise error or NeedMoreBytes."""
    buf, pos, limit, unpack = cur.buf, cur.pos, len(cur.buf), cur._u64
    out = []
    append = out.append
    for i in range(n):
        start = pos + 8
        if start <= limit:
            (length,) = unpack(buf, pos)
            end = start + length
            if end <= limit:
                append(buf[start:end].decode("utf-8", "surrogateescape"))
                pos = end
                continue
        cur.pos = pos
        append(cur.string(f"element {i} of array {_show(key)}"))
        pos = cur.pos
    cur.pos = pos
    return out


def _alignment(metadata: dict, types: dict) -> int:
    if "general.alignment" not in metadata:
        return DEFAULT_ALIGNMENT
    value = metadata["general.alignment"]
    if types["general.alignment"] != (GGUFValueType.UINT32,):
        raise GGUFError(f"general.alignment must be a uint32, found type {types['general.alignment'][0].name}")
    if value <= 0 or value & (value - 1):
        raise GGUFError(f"general.alignment is {value}; it must be a power of two")
    return value


def _read_tensor_info(cur: _Cursor, index: int):
    name = cur.string(f"the name of tensor #{index}")
    n_dims = cur.u32(f"the dimension count of tensor {_show(name)}")
    if n_dims > MAX_DIMS:
        raise GGUFError(f"tensor {_show(name)} has {n_dims} dimensions; ggml allows at most {MAX_DIMS}")
    dims = tuple(cur.u64(f"dimension {d} of tensor {_show(name)}") for d in range(n_dims))
    if any(d > _MAX_INT64 for d in dims):
        raise GGUFError(f"tensor {_show(name)} has an impossible dimension in {list(dims)}")
    raw_type = cur.u32(f"the type of tensor {_show(name)}")
    offset = cur.u64(f"the data offset of tensor {_show(name)}")
    return name, dims, raw_type, offset


def _place_tensors(raw_infos, data_offset: int, alignment: int, file_size):
    """Build TensorInfos and check names, types, alignment, overlap and that data lies within the file."""
    tensors, seen = [], set()
    for name, dims, raw_type, offset in raw_infos:
        if name in seen:
            raise GGUFError(f"tensor name {_show(name)} appears twice")
        seen.add(name)
        try:
            ggml_type = GGMLType(raw_type)
        except ValueError:
            raise GGUFError(f"tensor {_show(name)} has {ggml_type_name(raw_type)}") from None
        nbytes = tensor_nbytes(ggml_type, dims, name)
        if offset % alignment:
            raise GGUFError(f"tensor {_show(name)} has data offset {offset}, not a multiple of the alignment {alignment}")
        info = TensorInfo(name=name, dims=dims, type=ggml_type, offset=offset, abs_offset=data_offset + offset,
                          nbytes=nbytes)
        if file_size is not None and info.end > file_size:
            raise GGUFError(f"tensor {_show(name)} occupies bytes {info.abs_offset}..{info.end} but the file has only "
                            f"{file_size} bytes")
        tensors.append(info)
    # Sorted by start, a tensor overlaps an earlier one exactly when it starts before the furthest end so far.
    furthest = None
    for t in sorted((t for t in tensors if t.nbytes), key=lambda t: t.offset):
        if furthest is not None and t.abs_offset < furthest.end:
            raise GGUFError(f"tensors {_show(furthest.name)} (bytes {furthest.abs_offset}..{furthest.end}) and "
                            f"{_show(t.name)} (bytes {t.abs_offset}..{t.end}) overlap")
        if furthest is None or t.end > furthest.end:
            furthest = t
    return tensors
