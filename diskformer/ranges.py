"""HTTP `Range: bytes=...` parsing for one representation of a known size (RFC 9110 section 14).

The host answers a single range with 206 and anything it cannot satisfy with 416. A multi-range request
(`bytes=0-1,5-6`) is answered with the whole file (200): RFC 9110 lets a server ignore Range, and the engine only
ever asks for one span at a time, so multipart/byteranges bodies are not worth their complexity here.
"""
import re
from dataclasses import dataclass

# Digits are spelled [0-9] on purpose: `\d` and int() also accept other scripts' digits, '+', '_' and spaces.
_SPEC = re.compile(r"([0-9]*)-([0-9]*)")


@dataclass(frozen=True)
class ByteRange:
    """Inclusive byte span [start, end] of a representation of `size` bytes."""
    start: int
    end: int
    size: int

    @property
    def length(self) -> int:
        return self.end - self.start + 1

    def content_range(self) -> str:
        return f"bytes {self.start}-{self.end}/{self.size}"


class RangeNotSatisfiable(ValueError):
    """The Range header is malformed or selects no byte of the representation (-> 416)."""


WHOLE = "whole"  # sentinel: answer 200 with the full body (no Range, or a multi-range request)


# Past any real file size; longer numbers are taken as "beyond the end" rather than converted (int() refuses more
# than 4,300 digits, and converting a huge one costs quadratic time).
_MAX_DIGITS = 30
_BEYOND = 1 << 100


def _number(digits: str) -> int:
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= _MAX_DIGITS else _BEYOND


def _parse_spec(spec: str, size: int) -> ByteRange:
    m = _SPEC.fullmatch(spec.strip())
    if not m or (not m.group(1) and not m.group(2)):
        raise RangeNotSatisfiable(f"malformed byte range {spec.strip()[:60]!r}")
    first, last = m.group(1), m.group(2)
    if not first:  # suffix range: the last n bytes
        n = _number(last)
        if n == 0 or size == 0:
            raise RangeNotSatisfiable(f"suffix range {spec.strip()[:60]!r} selects no byte of a {size}-byte file")
        return ByteRange(max(0, size - n), size - 1, size)
    start = _number(first)
    end = _number(last) if last else size - 1
    if last and end < start:
        raise RangeNotSatisfiable(f"byte range {spec.strip()[:60]!r} ends before it starts")
    if start >= size:
        raise RangeNotSatisfiable(f"byte range {spec.strip()[:60]!r} starts at or past the end of a {size}-byte file")
    return ByteRange(start, min(end, size - 1), size)


def parse_range(header, size: int):
    """Return WHOLE for no Range or a multi-range request, else the one ByteRange it selects.

    Raises RangeNotSatisfiable for a malformed header, another unit than bytes, or a span outside the file.
    """
    if header is None:
        return WHOLE
    unit, eq, specs = header.strip().partition("=")
    if not eq or unit.strip().lower() != "bytes":
        raise RangeNotSatisfiable(f"unsupported Range header {header[:60]!r} (only 'bytes=' ranges)")
    parts = specs.split(",")
    ranges = [_parse_spec(p, size) for p in parts]  # validate every part, even when ignoring a multi-range
    if len(ranges) > 1:
        return WHOLE
    return ranges[0]
