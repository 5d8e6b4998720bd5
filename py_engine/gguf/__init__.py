"""GGUF reader (pure Python): a sans-IO header parser, drivers for range-only sources, the engine's support check
and bit-exact Q8_0/Q4_0 plane splitting."""
from .errors import GGUFError, NeedMoreBytes, TruncatedGGUF, UnsupportedGGUF
from .header import GGUFHeader, TensorInfo, tensor_byte_range
from .planes import split_q4_0, split_q8_0
from .reader import parse_header
from .sources import read_gguf_file, read_header_async, read_header_sync
from .supported import SUPPORTED_ARCHITECTURES, check_supported
from .types import BLOCK_LAYOUTS, ENGINE_TENSOR_TYPES, GGMLType, GGUFValueType, ggml_type_name, tensor_nbytes

__all__ = [
    "GGUFError", "NeedMoreBytes", "TruncatedGGUF", "UnsupportedGGUF",
    "GGUFHeader", "TensorInfo", "tensor_byte_range",
    "split_q4_0", "split_q8_0",
    "parse_header",
    "read_gguf_file", "read_header_async", "read_header_sync",
    "SUPPORTED_ARCHITECTURES", "check_supported",
    "BLOCK_LAYOUTS", "ENGINE_TENSOR_TYPES", "GGMLType", "GGUFValueType", "ggml_type_name", "tensor_nbytes",
]
