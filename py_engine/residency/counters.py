"""What the expert streamer did, per layer: the numbers behind hit rate, bytes per token and stalls.

hits            demanded expert already resident
late_hits       demanded expert still loading (a prefetch in flight): no second read, the demand waits for it
misses          demanded expert neither resident nor loading: a demand read
evictions       resident experts of this layer pushed out of the pool
prefetch_issued prefetch reads started (guesses that were resident, loading or queued are not counted)
prefetch_used   prefetched experts demanded afterwards (hit or late hit) before being evicted
prefetch_dropped guesses dropped: queued when their layer was demanded, for a layer already demanded, or no slot
prefetch_wasted prefetched experts evicted or cleared before any demand used them (read, never used)
prefetch_throttled guesses the accuracy throttle held back (prefetch_throttle.py)
placed_elsewhere demanded misses the placement hook sent to another tier instead of a slot (miss_placement.py)
bytes_read      record bytes the reader returned
bytes_demand    of those, bytes of demanded misses; bytes_prefetch: of prefetch reads
read_batches    reader calls (several records in one call where the reader takes batches)
read_ms, upload_ms  time inside reader.read_record / uploader.upload
wait_ms         time ensure() callers spent waiting for loads (the stall)
"""
COUNT_FIELDS = ("hits", "late_hits", "misses", "evictions", "prefetch_issued", "prefetch_used",
                "prefetch_dropped", "prefetch_wasted", "prefetch_throttled", "placed_elsewhere", "bytes_read",
                "bytes_demand", "bytes_prefetch", "read_batches")
TIME_FIELDS = ("read_ms", "upload_ms", "wait_ms")


class StreamerCounters:
    def __init__(self, layers):
        self.layers = layers
        self.reset()

    def reset(self):
        for f in COUNT_FIELDS:
            setattr(self, f, [0] * self.layers)
        for f in TIME_FIELDS:
            setattr(self, f, [0.0] * self.layers)
        self.tokens = 0

    def add(self, field, layer, amount=1):
        getattr(self, field)[layer] += amount

    def total(self, field):
        return sum(getattr(self, field))

    def as_dict(self):
        """Totals, derived rates and a per-layer breakdown; plain numbers, JSON-ready."""
        out = {f: self.total(f) for f in COUNT_FIELDS + TIME_FIELDS}
        demanded = out["hits"] + out["late_hits"] + out["misses"]
        out["demanded"] = demanded
        out["tokens"] = self.tokens
        out["hit_rate"] = (out["hits"] + out["late_hits"]) / demanded if demanded else 0.0
        issued = out["prefetch_issued"]
        out["prefetch_accuracy"] = out["prefetch_used"] / issued if issued else 0.0
        n = max(1, self.tokens)
        out["bytes_per_token"] = out["bytes_read"] / n
        out["demand_bytes_per_token"] = out["bytes_demand"] / n
        # read and never used: the prefetches evicted or cleared unused, at the average prefetch record size
        per_prefetch = out["bytes_prefetch"] / issued if issued else 0.0
        out["wasted_prefetch_bytes"] = out["prefetch_wasted"] * per_prefetch
        out["wasted_bytes_per_token"] = out["wasted_prefetch_bytes"] / n
        out["misses_per_token"] = out["misses"] / n
        out["per_layer"] = [
            {f: getattr(self, f)[layer] for f in COUNT_FIELDS + TIME_FIELDS} for layer in range(self.layers)]
        return out
