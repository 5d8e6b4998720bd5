"""A kernel's uniform parameters packed by field name from its WGSL `struct Params`, the one definition of them.

Each kernel declares `struct Params { name: u32, eps: f32, ... }` (scalars of 4 bytes, in order). The layout is
parsed once per pipeline (Pipelines.params_layout) and launchers pack a dict of field values at record time; a
missing or unknown field is an error naming the kernel and the fields, so the WGSL and its launcher cannot drift
apart silently. Fields named `pad`, `pad0`, `_pad1`, ... are padding: they default to 0.
"""
import re
import struct

_STRUCT = re.compile(r"\bstruct\s+Params\s*\{([^}]*)\}")
_COMMENT = re.compile(r"//[^\n]*")
_FIELD = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*([A-Za-z0-9_<>]+)\s*$")
_PAD = re.compile(r"^_?pad\d*$")
_CODES = {"u32": "I", "i32": "i", "f32": "f"}


class ParamsError(ValueError):
    """A kernel's parameters do not match its `struct Params`."""


class ParamsLayout:
    """The fields of one kernel's `struct Params`: names, WGSL types and the struct format packing them."""

    def __init__(self, kernel: str, fields: list):
        self.kernel = kernel
        self.fields = tuple(fields)  # ((name, wgsl type), ...)
        self.names = tuple(name for name, _ in self.fields)
        self._known = frozenset(self.names)
        self._required = frozenset(name for name in self.names if not _PAD.match(name))
        self._format = struct.Struct("<" + "".join(_CODES[t] for _, t in self.fields))

    @classmethod
    def parse(cls, source: str, kernel: str = "kernel") -> "ParamsLayout":
        """The layout of the `struct Params` in WGSL `source` (an assembled kernel or a single file)."""
        found = _STRUCT.findall(_COMMENT.sub("", source))
        if len(found) != 1:
            raise ParamsError(f"{kernel}: expected one `struct Params`, found {len(found)}")
        fields = []
        for part in found[0].split(","):
            if not part.strip():
                continue
            m = _FIELD.match(part)
            if m is None or m.group(2) not in _CODES:
                raise ParamsError(f"{kernel}: Params field {part.strip()!r} is not a u32, i32 or f32 scalar")
            fields.append((m.group(1), m.group(2)))
        if not fields:
            raise ParamsError(f"{kernel}: `struct Params` has no fields")
        names = [name for name, _ in fields]
        if len(set(names)) != len(names):
            raise ParamsError(f"{kernel}: a Params field is declared twice ({', '.join(names)})")
        return cls(kernel, fields)

    @property
    def size(self) -> int:
        return self._format.size

    def pack(self, values: dict) -> bytes:
        """The struct's bytes from {field: value}; padding fields may be left out."""
        keys = values.keys()
        if not (keys <= self._known and self._required <= keys):
            unknown = [k for k in values if k not in self._known]
            missing = [k for k in self._required if k not in values]
            parts = ([f"unknown {', '.join(sorted(unknown))}"] if unknown else []) + (
                [f"missing {', '.join(sorted(missing))}"] if missing else [])
            raise ParamsError(f"{self.kernel}: parameters do not match its struct Params ({'; '.join(parts)}); "
                              f"it declares {', '.join(self.names)}")
        try:
            return self._format.pack(*[values.get(name, 0) for name in self.names])
        except struct.error as exc:
            raise ParamsError(f"{self.kernel}: a parameter does not fit its type "
                              f"({', '.join(f'{n}: {t}' for n, t in self.fields)}): {exc}") from None
