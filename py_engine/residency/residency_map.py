"""The GPU's view of residency: slot of (layer, expert), or ABSENT, as a flat 32-bit array.

Entry layer * experts + expert holds the slot index, or -1 (0xFFFFFFFF read as u32) when the expert is not in the
pool; the route kernel reads it to find slots (or to stop at a missing expert). The streamer's on_map_change hook
calls `set`; `flush(write)` then sends only what changed since the last flush, as a few contiguous byte ranges
(every writeBuffer is an FFI call and a queue operation, so nearby changes are merged into one range when the gap
between them is at most `merge_gap` entries).

Set an entry only once the expert's upload has been *submitted*: WebGPU runs queue operations in order, so any
dispatch submitted after the flush sees the uploaded bytes.
"""
from array import array

ABSENT = -1


class ResidencyMap:
    def __init__(self, layers, experts, merge_gap=16):
        if layers <= 0 or experts <= 0:
            raise ValueError(f"layers and experts must be positive, got {layers} x {experts}")
        self.layers = layers
        self.experts = experts
        self.merge_gap = merge_gap
        self.entries = array("i", [ABSENT]) * (layers * experts)
        if self.entries.itemsize != 4:
            raise RuntimeError("array('i') is not 32-bit on this platform")
        self._dirty = set(range(len(self.entries)))  # the GPU copy starts undefined: first flush writes all

    def index(self, layer, expert):
        if not (0 <= layer < self.layers and 0 <= expert < self.experts):
            raise IndexError(f"(layer {layer}, expert {expert}) outside {self.layers} x {self.experts}")
        return layer * self.experts + expert

    def get(self, layer, expert):
        return self.entries[self.index(layer, expert)]

    def set(self, layer, expert, slot):
        i = self.index(layer, expert)
        if self.entries[i] != slot:
            self.entries[i] = slot
            self._dirty.add(i)

    on_map_change = set  # the streamer's hook signature: (layer, expert, slot or -1)

    def reset(self):
        for i, v in enumerate(self.entries):
            if v != ABSENT:
                self.entries[i] = ABSENT
                self._dirty.add(i)

    @property
    def nbytes(self):
        return len(self.entries) * 4

    def dirty_ranges(self):
        """Changed entries as merged half-open [start, end) entry ranges, ascending."""
        ranges = []
        for i in sorted(self._dirty):
            if ranges and i - ranges[-1][1] <= self.merge_gap:
                ranges[-1][1] = i + 1
            else:
                ranges.append([i, i + 1])
        return [(a, b) for a, b in ranges]

    def flush(self, write):
        """Call write(byte_offset, data) for each changed range (data: a memoryview of little-endian 32-bit words,
        a multiple of 4 bytes as writeBuffer requires). Returns the number of bytes written."""
        view = memoryview(self.entries).cast("B")
        written = 0
        for a, b in self.dirty_ranges():
            write(a * 4, view[a * 4:b * 4])
            written += (b - a) * 4
        self._dirty.clear()
        return written
