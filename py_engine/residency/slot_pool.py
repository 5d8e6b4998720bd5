"""Where each expert slot lives: a fixed pool of S equal slots split over several GPU buffers.

No single storage binding may exceed the device's maxStorageBufferBindingSize (128 MiB on lavapipe), while a pool
is often several GiB, so the pool is cut into buffers of at most `slots_per_buffer` slots. Slot s lives in buffer
s // slots_per_buffer at byte offset (s % slots_per_buffer) * slot_stride; every buffer but the last holds exactly
slots_per_buffer slots, so a shader finds a slot with one division. The stride is the record rounded up to
`alignment` (256 = minStorageBufferOffsetAlignment) so a slot can also be bound on its own with an offset.
"""


def round_up(n, alignment):
    return -(-n // alignment) * alignment


class SlotPoolLayout:
    def __init__(self, record_bytes, slots, max_binding_bytes, alignment=256):
        for name, v in (("record_bytes", record_bytes), ("slots", slots),
                        ("max_binding_bytes", max_binding_bytes), ("alignment", alignment)):
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if alignment & (alignment - 1):
            raise ValueError(f"alignment must be a power of two, got {alignment}")
        self.record_bytes = record_bytes
        self.slots = slots
        self.max_binding_bytes = max_binding_bytes
        self.alignment = alignment
        self.slot_stride = round_up(record_bytes, alignment)
        self.slots_per_buffer = min(slots, max_binding_bytes // self.slot_stride)
        if self.slots_per_buffer == 0:
            raise ValueError(
                f"one expert record ({record_bytes} B, {self.slot_stride} B aligned to {alignment}) does not fit "
                f"a storage binding of {max_binding_bytes} B; the device's maxStorageBufferBindingSize is too small")
        self.buffer_count = -(-slots // self.slots_per_buffer)

    @classmethod
    def for_budget(cls, record_bytes, budget_bytes, max_binding_bytes, alignment=256):
        """As many slots as `budget_bytes` holds."""
        slots = budget_bytes // round_up(record_bytes, alignment)
        if slots <= 0:
            raise ValueError(f"an expert pool budget of {budget_bytes} B holds no {record_bytes} B record")
        return cls(record_bytes, slots, max_binding_bytes, alignment)

    def slots_in_buffer(self, buffer_index):
        if not 0 <= buffer_index < self.buffer_count:
            raise IndexError(f"buffer {buffer_index} out of range (pool has {self.buffer_count} buffers)")
        if buffer_index < self.buffer_count - 1:
            return self.slots_per_buffer
        return self.slots - self.slots_per_buffer * (self.buffer_count - 1)

    def buffer_bytes(self, buffer_index):
        return self.slots_in_buffer(buffer_index) * self.slot_stride

    @property
    def buffer_sizes(self):
        return [self.buffer_bytes(b) for b in range(self.buffer_count)]

    @property
    def total_bytes(self):
        return self.slots * self.slot_stride

    def locate(self, slot):
        """(buffer index, byte offset) of `slot`."""
        if not 0 <= slot < self.slots:
            raise IndexError(f"slot {slot} out of range (pool has {self.slots} slots)")
        b, i = divmod(slot, self.slots_per_buffer)
        return b, i * self.slot_stride

    def __repr__(self):
        return (f"SlotPoolLayout({self.slots} slots x {self.slot_stride} B in {self.buffer_count} buffers of "
                f"<= {self.slots_per_buffer} slots)")
