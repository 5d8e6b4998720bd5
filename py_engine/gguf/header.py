"""What a parsed GGUF header holds: metadata, tensor infos and where the tensor data starts."""
from dataclasses import dataclass, field

from .errors import GGUFError
from .types import GGMLType

_MISSING = object()


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dims: tuple  # GGUF `ne` order: dims[0] is the contiguous (row) axis
    type: GGMLType
    offset: int  # relative to the start of the data section, as stored in the file
    abs_offset: int  # from the start of the file
    nbytes: int

    @property
    def shape(self) -> tuple:
        """numpy / PyTorch order (slowest axis first): the reverse of `dims`."""
        return tuple(reversed(self.dims))

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n

    @property
    def end(self) -> int:
        """Absolute offset one past the tensor's last byte."""
        return self.abs_offset + self.nbytes


@dataclass
class GGUFHeader:
    version: int
    byte_order: str  # "<" little-endian, ">" big-endian (GGUF v3 allows both)
    metadata: dict  # key -> int | float | bool | str | list (arrays, nested as lists)
    # key -> value type as gguf-py spells it: (T,) for scalars and strings, (ARRAY, element type) for arrays,
    # (ARRAY, ARRAY) for arrays of arrays.
    metadata_types: dict
    tensors: list  # TensorInfo in file order
    alignment: int
    data_offset: int  # absolute offset of the data section (end of the tensor infos, aligned)
    file_size: "int | None"  # None when parse_header was not told the file size
    tensors_by_name: dict = field(init=False, repr=False)

    def __post_init__(self):
        self.tensors_by_name = {t.name: t for t in self.tensors}

    @property
    def header_size(self) -> int:
        """Bytes before the data section: what must be fetched to parse the header again."""
        return self.data_offset

    @property
    def architecture(self) -> "str | None":
        return self.metadata.get("general.architecture")

    def get(self, key: str, default=None):
        return self.metadata.get(key, default)

    def arch_key(self, suffix: str, default=_MISSING):
        """metadata[f"{architecture}.{suffix}"], e.g. arch_key("block_count")."""
        key = f"{self.architecture}.{suffix}"
        if key in self.metadata:
            return self.metadata[key]
        if default is _MISSING:
            raise GGUFError(f"metadata key {key!r} is missing")
        return default

    def tensor(self, name: str) -> TensorInfo:
        try:
            return self.tensors_by_name[name]
        except KeyError:
            raise GGUFError(f"the file has no tensor named {name!r}") from None


def tensor_byte_range(header: GGUFHeader, name: str) -> tuple:
    """(absolute offset, byte count) of a tensor's data in the file."""
    info = header.tensor(name)
    return info.abs_offset, info.nbytes

