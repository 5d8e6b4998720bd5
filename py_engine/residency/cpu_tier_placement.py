"""Which demanded misses the CPU expert tier computes instead of the GPU pool taking them (the Fiddler rule, from
rates measured at load and refined as tokens run).

A miss costs a record read either way. Uploaded, it then costs the upload (`upload_ms`) and may be hit again while
it stays in its slot, which saves a later miss (a read plus the cheaper of computing and uploading); computed on the
CPU, it costs `cpu_ms` and leaves nothing behind. With `reuse` the chance that an uploaded expert is hit again (the
recent share of a layer's picks it also made for the previous token: routing locality, measured whichever tier
served the picks), the CPU takes the miss when

    cpu_ms < upload_ms - reuse * (read_ms + min(cpu_ms, upload_ms))

mode "all" sends every miss it can to the CPU (a check of the path, or a GPU too small to keep anything). At most
`per_layer` misses of a layer go to the CPU (the tier's record slots). The placement only decides while `active`
(the per-layer routing loop, which computes the CPU's experts before the layer's submit); elsewhere every miss is
uploaded as before.
"""
from dataclasses import dataclass

MODES = ("cost", "all")


@dataclass
class TierRates:
    """ms per expert record: read from the store, uploaded into a slot, computed by the CPU tier."""
    read_ms: float
    upload_ms: float
    cpu_ms: float

    def as_dict(self) -> dict:
        return {"read_ms": self.read_ms, "upload_ms": self.upload_ms, "cpu_ms": self.cpu_ms}


class CpuTierPlacement:
    """A miss placement (residency/miss_placement.py) that sends one-off misses to the CPU tier."""

    name = "cpu_tier"
    SMOOTHING = 0.2  # weight of the newest observation in the running rates and hit share

    def __init__(self, rates: TierRates, per_layer: int, reuse: float, mode: str = "cost"):
        if mode not in MODES:
            raise ValueError(f"CPU tier placement {mode!r}: use one of {', '.join(MODES)}")
        if per_layer < 1:
            raise ValueError(f"the CPU tier needs room for at least one expert per layer, got {per_layer}")
        self.rates, self.per_layer, self.reuse, self.mode = rates, per_layer, reuse, mode
        self.active = False
        self.layer, self.placed = None, []  # the experts the CPU took in the layer being claimed, in claim order

    def begin(self, layer: int) -> None:
        """Start deciding for `layer`'s demand (the next ensure call)."""
        self.active, self.layer, self.placed = True, layer, []

    def end(self) -> None:
        self.active = False

    def prefers_cpu(self) -> bool:
        if self.mode == "all":
            return True
        r = self.rates
        return r.cpu_ms < r.upload_ms - self.reuse * (r.read_ms + min(r.cpu_ms, r.upload_ms))

    def upload(self, layer: int, expert: int) -> bool:
        if not self.active or layer != self.layer or len(self.placed) >= self.per_layer or not self.prefers_cpu():
            return True
        self.placed.append(expert)
        return False

    def observe(self, hits: int, picks: int, cpu_ms_per_expert: float = None, upload_ms: float = None) -> None:
        """After a layer: how many of its picks were reused (for `reuse`), and the measured cost of the experts
        the CPU computed and of the records uploaded, when there were any."""
        a = self.SMOOTHING
        if picks:
            self.reuse += a * (hits / picks - self.reuse)
        if cpu_ms_per_expert is not None:
            self.rates.cpu_ms += a * (cpu_ms_per_expert - self.rates.cpu_ms)
        if upload_ms is not None:
            self.rates.upload_ms += a * (upload_ms - self.rates.upload_ms)
