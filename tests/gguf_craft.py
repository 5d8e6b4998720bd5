"""Write GGUF bytes by hand (struct only) for the reader's tests: valid files of any version and byte order, and
the raw material for corrupt ones. Independent of py_engine's parser on purpose."""
import struct
from dataclasses import dataclass, field

# GGUF value type ids and struct formats, written out again here rather than imported from the code under test.
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
FORMATS = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "?", U64: "Q", I64: "q",
           F64: "d"}


def arr(elem_spec):
    """Type spec of an array whose elements have type spec elem_spec (an id, or arr(...) for nesting)."""
    return (ARR, elem_spec)


@dataclass
class Craft:
    version: int = 3
    order: str = "<"
    kvs: list = field(default_factory=list)  # (key, type spec, value)
    tensors: list = field(default_factory=list)  # (name, dims, ggml type id, offset)
    alignment: int = 32
    data: bytes = b""  # the data section (after padding)

    def kv(self, key, spec, value):
        self.kvs.append((key, spec, value))
        return self

    def kv_raw(self, key, type_id, payload):
        """A key with any type id and hand-made value bytes (for corrupt files)."""
        self.kvs.append((key, ("raw", type_id), payload))
        return self

    def tensor(self, name, dims, ggml_type, offset):
        self.tensors.append((name, tuple(dims), ggml_type, offset))
        return self

    # -- encoding ------------------------------------------------------------------------------------------
    def _count(self, n):
        # v1 stored counts and lengths as u32; v2 and later as u64.
        return struct.pack(self.order + ("I" if self.version == 1 else "Q"), n)

    def string(self, s):
        b = s.encode("utf-8", "surrogateescape") if isinstance(s, str) else bytes(s)
        return self._count(len(b)) + b

    def value(self, spec, value):
        if spec == STR:
            return self.string(value)
        if isinstance(spec, tuple):
            elem = spec[1]
            elem_id = ARR if isinstance(elem, tuple) else elem
            return (struct.pack(self.order + "I", elem_id) + self._count(len(value))
                    + b"".join(self.value(elem, v) for v in value))
        return struct.pack(self.order + FORMATS[spec], value)

    def header_bytes(self):
        """Everything before the padding that precedes the data section."""
        out = bytearray(b"GGUF")
        out += struct.pack(self.order + "I", self.version)
        out += self._count(len(self.tensors)) + self._count(len(self.kvs))
        for key, spec, value in self.kvs:
            out += self.string(key)
            if isinstance(spec, tuple) and spec[0] == "raw":
                out += struct.pack(self.order + "I", spec[1]) + value
                continue
            out += struct.pack(self.order + "I", ARR if isinstance(spec, tuple) else spec)
            out += self.value(spec, value)
        for name, dims, ggml_type, offset in self.tensors:
            out += self.string(name) + struct.pack(self.order + "I", len(dims))
            out += b"".join(struct.pack(self.order + "Q", d) for d in dims)
            out += struct.pack(self.order + "IQ", ggml_type, offset)
        return bytes(out)

    def build(self):
        head = self.header_bytes()
        pad = -len(head) % self.alignment
        return head + bytes(pad) + self.data


def small_model_craft():
    """A small, valid little-endian v3 file with every value type, nested arrays and a few tensors."""
    c = Craft()
    c.kv("general.architecture", STR, "toy").kv("general.alignment", U32, 64)
    c.kv("t.u8", U8, 255).kv("t.i8", I8, -128).kv("t.u16", U16, 65535).kv("t.i16", I16, -32768)
    c.kv("t.u32", U32, 2**32 - 1).kv("t.i32", I32, -2**31).kv("t.f32", F32, 0.1).kv("t.bool", BOOL, True)
    c.kv("t.u64", U64, 2**64 - 1).kv("t.i64", I64, -2**63).kv("t.f64", F64, 1e300).kv("t.str", STR, "héllo")
    c.kv("t.arr_u8", arr(U8), [1, 2, 3]).kv("t.arr_str", arr(STR), ["a", "", "ü"])
    c.kv("t.arr_bool", arr(BOOL), [True, False]).kv("t.empty", arr(F32), [])
    c.kv("t.nested", arr(arr(I32)), [[1, 2], [], [3]])
    c.kv("t.deep", arr(arr(arr(STR))), [[["x"], []], [["y", "z"]]])
    # F32 [4, 2] (32 B) at 0, Q8_0 [32, 2] (68 B) at 64, F16 [8] (16 B) at 192
    c.tensor("a.weight", (4, 2), 0, 0).tensor("b.weight", (32, 2), 8, 64).tensor("c.weight", (8,), 1, 192)
    c.alignment = 64
    c.data = bytes(range(208))
    return c


def craft_from_header(h) -> Craft:
    """A Craft that writes the header of `h` (a parsed py_engine GGUFHeader) again, byte for byte: edit its
    metadata or tensor infos, then build."""
    c = Craft(version=h.version, order=h.byte_order, alignment=h.alignment)
    for key, value in h.metadata.items():
        types = h.metadata_types[key]
        c.kv(key, arr(int(types[1])) if types[0] == ARR else int(types[0]), value)
    for t in h.tensors:
        c.tensor(t.name, t.dims, int(t.type), t.offset)
    return c
