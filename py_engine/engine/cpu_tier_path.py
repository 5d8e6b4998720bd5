"""The CPU expert tier in the per-layer routing loop: misses the cost model places on the CPU are computed there and
their weighted sum is added on the GPU (StoreOptions(cpu_tier=N), N worker threads).

Per MoE layer the per-layer runner already reads the routed ids back; with the tier on, the same readback also
brings the routing weights and the layer's FFN input xn (what the routed experts multiply). The streamer asks the
placement (residency/cpu_tier_placement.py) per demanded miss; one placed on the CPU gets no slot (ELSEWHERE), so
the GPU's residency check finds it absent and the pool products give it zero output and zero weight in the layer's
sum. Its record is read through the streamer's own reader (alongside the uploads of the other misses), the tier
computes Σ w_j · FFN_j(xn) for the layer's CPU experts, and that row is written into this layer's row of `out`; a
dispatch recorded right after the layer's residency check adds the row into h (the router has already read h by
then, and the routed and shared experts read xn, so the sum is the same as adding it with the experts'). A model
that does more with the routed sum than add it to h (gemma4: a post-norm; models/registry.py CpuExperts) has the
row added into that sum right after its combine instead, its experts' input read back in place of xn, and any
per-expert output scale folded into the routing weights (as the GPU's combine multiplies them). A layer
with no CPU experts this token has its row zeroed again before its submit. A check that finds an expert absent sets
the pool's stop flag (the early-stop mode's signal; nothing is guarded in per-layer routing), which is cleared
before the next layer's submit so that its check runs; the pool's `gpu_stops` counts these checks too.
"""
import asyncio
import struct
import time

import js

from ..cpu_tier.expert_tier import CpuExpertTier
from ..models.registry import CpuExperts
from ..residency.cpu_tier_placement import CpuTierPlacement, TierRates
from ..gpu.buffers import storage_buffer

ROW_ALIGN = 256  # storage bindings start at multiples of minStorageBufferOffsetAlignment


def fill_record(view, data) -> None:
    """Copy one record (Python bytes or a JS Uint8Array from Node's fs) into the tier's shared-memory view."""
    if hasattr(data, "byteLength"):
        view.set(data)
    else:
        view.assign(data)


def f32_product(a: float, b: float) -> float:
    """a · b rounded to f32, as an f32 multiply gives it (the exact double product rounded once)."""
    return struct.unpack("<f", struct.pack("<f", a * b))[0]


class CpuTierPath:
    def __init__(self, gpu, tier: CpuExpertTier, placement: CpuTierPlacement, reader, pool, k: int, workers: int,
                 experts: CpuExperts = CpuExperts()):
        self.workers, self.status = workers, pool.status
        self.experts = experts
        self.down_scales = None  # per layer, per expert: the output scales folded into the routing weights
        self.n_layers = n_layers = pool.n_layers
        self.flagged = False  # a residency check saw this tier's absent experts: its stop flag is set
        self.gpu, self.tier, self.placement, self.reader, self.k = gpu, tier, placement, reader, k
        self.n_embd = tier.n_embd
        self.row_bytes = 4 * self.n_embd
        self.stride = (self.row_bytes + ROW_ALIGN - 1) // ROW_ALIGN * ROW_ALIGN
        self.out = storage_buffer(gpu, self.stride * n_layers, "cpu_expert_out")
        self.zeros = js.Uint8Array.new(self.row_bytes)
        self.dirty = set()  # layers whose row of `out` holds a sum from an earlier token
        self.at = {}  # layer -> where its weights and xn start in that layer's readback
        self.rates_at_load = TierRates(**placement.rates.as_dict())
        self.counts = {"experts": 0, "layers": 0, "compute_ms": 0.0, "read_ms": 0.0, "bytes_read": 0,
                       "wait_ms": 0.0}
        self._layer, self._task, self._chosen = None, None, []
        self.last_ids = {}  # layer -> the experts it picked for the previous token

    @classmethod
    async def open(cls, gpu, layout: dict, pool, reader, *, k: int, workers: int, mode: str, per_layer=None,
                   url=None, experts: CpuExperts = CpuExperts()) -> "CpuTierPath":
        """Start `workers` CPU workers for `layout`'s records (room for a layer's `k` routed experts) and measure
        the rates the placement weighs: a record read through `reader`, an upload into the pool (its slot 0, free
        before the first token) and the tier's compute, each per expert record. `experts`: how the model's experts
        are computed and summed (models/registry.py)."""
        n_layers, n_experts = pool.n_layers, pool.n_experts
        tier = await CpuExpertTier.open(layout, workers=workers, slots=k, tokens=1, url=url,
                                        activation=experts.activation)
        try:
            t0 = time.perf_counter()
            records = await reader.read_records(0, list(range(k)))
            read_ms = (time.perf_counter() - t0) * 1e3 / k
            for s, data in enumerate(records):
                fill_record(tier.record(s), data)
            cpu_ms = (await tier.measure(jobs=k, repeats=3))["ms"] / k
            t1 = time.perf_counter()
            pending = pool.upload(0, records[0])
            if pending is not None:
                await pending
            await gpu.queue.onSubmittedWorkDone()
            upload_ms = (time.perf_counter() - t1) * 1e3
        except BaseException:
            tier.close()
            raise
        placement = CpuTierPlacement(TierRates(read_ms, upload_ms, cpu_ms), per_layer=min(per_layer or k, k),
                                     reuse=pool.layout.slots / (n_layers * n_experts), mode=mode)
        return cls(gpu, tier, placement, reader, pool, k, workers, experts)

    def fold_scales(self, down_scales) -> None:
        """Per layer, each expert's output scale: a routing weight sent to the workers is multiplied by it."""
        self.down_scales = [list(v) for v in down_scales]

    # ---- recording -------------------------------------------------------------------------------------------
    def recorder(self, y):
        """A hook StreamingKernels calls while recording a layer: y += this layer's CPU row."""
        def add_cpu_row(kern, dl, layer):
            kern.add(dl, (self.out, layer * self.stride, self.row_bytes), y, self.n_embd,
                     label=f"ffn_moe_cpu_out-{layer}")
        return add_cpu_row

    def hook(self, kern, acts) -> None:
        """Record the add of each layer's CPU row where the model's routed sum goes: into h after the residency
        check, or into the routed sum after its combine (StreamingKernels.after_check / after_combine)."""
        into = self.experts.sum_into
        if into == "h":
            kern.after_check = self.recorder(acts["h"])
        else:
            kern.after_combine = self.recorder(acts[into])

    @property
    def input_name(self) -> str:
        """The activation buffer the routed experts multiply (read back with the routing weights)."""
        return self.experts.input

    def copies(self, layer: int, route_w, xn, at: int) -> list:
        """The readback copies that bring the layer's routing weights and xn, from byte `at` (4-aligned)."""
        self.at[layer] = at
        return [(route_w, 0, at, 4 * self.k), (xn, 0, at + 4 * self.k, self.row_bytes)]

    @property
    def nbytes(self) -> int:
        """GPU bytes: a row per layer (not in the budget's plan: ~n_layers * n_embd * 4, small beside a record)."""
        return self.stride * self.n_layers

    @property
    def readback_bytes(self) -> int:
        return 4 * self.k + self.row_bytes

    # ---- per layer ---------------------------------------------------------------------------------------------
    def begin(self, layer: int) -> None:
        """Before the layer's ensure: the placement decides for it."""
        self._layer = layer
        self.placement.begin(layer)

    def claimed(self, raw: bytes) -> None:
        """Right after the ensure: start serving the experts placed on the CPU (in claim order, which is the
        routed order): their records are read beside the uploads' reads and computed by the tier's workers while
        the token loop waits for the uploads. `raw`: the layer's readback (weights and xn)."""
        self.placement.end()
        chosen = list(self.placement.placed)
        self._task = asyncio.ensure_future(self._serve(self._layer, chosen, raw)) if chosen else None
        self._chosen = chosen

    async def _serve(self, layer, experts, raw):
        t0 = time.perf_counter()
        records = await self.reader.read_records(layer, experts)
        t1 = time.perf_counter()
        for s, data in enumerate(records):
            fill_record(self.tier.record(s), data)
        at = self.at[layer]
        weights = struct.unpack_from(f"<{self.k}f", raw, at)
        x = memoryview(raw)[at + 4 * self.k:at + 4 * self.k + self.row_bytes]
        placed = {e: w for e, w in zip(struct.unpack_from(f"<{self.k}I", raw, 0), weights)}
        if self.down_scales is not None:  # route_w · scale[e], the product the GPU's combine takes
            placed = {e: f32_product(w, self.down_scales[layer][e]) for e, w in placed.items()}
        row = await self.tier.compute_async(x, slots=list(range(len(experts))),
                                            weights=[placed[e] for e in experts])
        return row, (t1 - t0) * 1e3, (time.perf_counter() - t1) * 1e3

    async def finish(self, layer: int, ids, slots, raw: bytes) -> None:
        """After the layer's uploads: wait for its CPU experts and write their weighted sum into its row of `out`
        (or zero a row left from an earlier token)."""
        jobs = [j for j, s in enumerate(slots) if s < 0]
        if self.flagged:
            # the last check found this tier's experts absent and set the stop flag (moe_residency.wgsl), which
            # would make every later check return before writing its slots: clear it before the next submit
            self.gpu.queue.writeBuffer(self.status, 4, self.zeros, 0, 4)
            self.flagged = False
        # reuse: how many of these picks the layer also made for the previous token (routing locality, whatever
        # tier served them: an expert kept on the CPU is never hit in the pool, so the pool's hits would not do)
        last = self.last_ids.get(layer)
        if last is not None:
            self.placement.observe(len(set(ids) & last), len(ids))
        self.last_ids[layer] = set(ids)
        task, self._task = self._task, None
        if [ids[j] for j in jobs] != self._chosen:
            raise RuntimeError(f"layer {layer}: the experts without a slot ({[ids[j] for j in jobs]}) are not those "
                               f"placed on the CPU ({self._chosen})")
        if task is None:
            if layer in self.dirty:
                self.gpu.queue.writeBuffer(self.out, layer * self.stride, self.zeros)
                self.dirty.discard(layer)
            return
        t0 = time.perf_counter()
        row, read_ms, compute_ms = await task
        self.gpu.queue.writeBuffer(self.out, layer * self.stride, row)
        self.dirty.add(layer)
        self.flagged = True
        c = self.counts
        c["experts"] += len(jobs)
        c["bytes_read"] += len(jobs) * self.tier.record_size  # besides the streamer's (uploaded) bytes
        c["layers"] += 1
        c["read_ms"] += read_ms
        c["compute_ms"] += compute_ms
        c["wait_ms"] += (time.perf_counter() - t0) * 1e3
        self.placement.observe(0, 0, cpu_ms_per_expert=compute_ms / len(jobs))

    def end_token(self) -> None:
        """After a token's last submit: clear the stop flag its last CPU layer left (a prefill chunk's checks
        come next)."""
        if self.flagged:
            self.gpu.queue.writeBuffer(self.status, 4, self.zeros, 0, 4)
            self.flagged = False

    # ---- bookkeeping -------------------------------------------------------------------------------------------
    def summary(self, streamer_counters, tokens: int) -> dict:
        misses = streamer_counters.total("misses")
        placed = streamer_counters.total("placed_elsewhere")
        c = self.counts
        return {"workers": self.workers, "mode": self.placement.mode, "experts": c["experts"],
                "share_of_misses": placed / misses if misses else 0.0,
                "ms_per_token": (c["compute_ms"] + c["read_ms"]) / tokens if tokens else None,
                "compute_ms": c["compute_ms"], "read_ms": c["read_ms"], "bytes_read": c["bytes_read"],
                # what the token loop waited for the tier after the layer's uploads were in
                "wait_ms_per_token": c["wait_ms"] / tokens if tokens else None,
                "rates_at_load": self.rates_at_load.as_dict(), "rates": self.placement.rates.as_dict(),
                "reuse": self.placement.reuse}

    def release(self) -> None:
        self.tier.close()
        self.out.destroy()
