"""The GPU expert pool: S slots of store records split over several buffers, filled by the ExpertStreamer, and the
kernels that route through it on the GPU.

Per MoE layer the recorded token runs `router_topk` (ids on the GPU), then `moe_residency.wgsl` (slot of each
id from the GPU copy of the residency map, misses counted), then `moe_pool_matvec.wgsl` once per pool buffer for
gate, up and down. `StreamingKernels` is the stock `Kernels` with `moe_matvec` redirected to the pool when the model
hands it a `PoolPart` (store_weights.py), and the router look-ahead (lookahead.py) recorded before each residency
check when prefetch is on; it remembers where each layer's residency check sits in the dispatch
list, which is where the decoder cuts the token when the pool cannot hold every expert (store_decoder.py).
"""
import asyncio
import struct

import js

from ..gpu.buffers import Readback, storage_buffer, uniform_buffer, write_buffer
from ..gpu.jsutil import js_bytes
from ..gpu.kernels import Kernels, lanes_for, xfmt
from ..gpu.staging_ring import StagingRing, WriteBufferUploads
from ..residency import ExpertStreamer, ResidencyMap, StreamerTuning
from .store_weights import PoolPart

MAX_TOP_K = 64


class ExpertPool:
    """Slots, the residency map (CPU and GPU copies) and the streamer that fills them."""

    def __init__(self, gpu, layout, *, n_layers, n_experts, reader, upload="staging", ring_buffers=4,
                 policy="lru", max_inflight=16, placement=None):
        if upload not in ("staging", "writebuffer"):
            raise ValueError(f"upload must be 'staging' or 'writebuffer', got {upload!r}")
        self.gpu, self.layout = gpu, layout
        self.n_layers, self.n_experts = n_layers, n_experts
        self.buffers = [storage_buffer(gpu, layout.buffer_bytes(b), f"expert_pool.{b}")
                        for b in range(layout.buffer_count)]
        self.uploads = (StagingRing(gpu, layout.record_bytes, ring_buffers, "expert_staging") if upload == "staging"
                        else WriteBufferUploads(gpu))
        self.map = ResidencyMap(n_layers, n_experts)
        self.slot_map = storage_buffer(gpu, self.map.nbytes, "slot_map")
        self.route_slots = storage_buffer(gpu, 4 * MAX_TOP_K, "route_slots")
        self.route_hist = storage_buffer(gpu, 4 * MAX_TOP_K * n_layers, "route_hist")
        self.status = storage_buffer(gpu, 16, "residency_status")
        write_buffer(gpu, self.status, 0, bytes(16))
        self.guard_info = uniform_buffer(gpu, bytes(16), "guard_info")  # guarded dispatch count (0: no guard)
        self.no_args = storage_buffer(gpu, 16, "guard_args_unused")
        self.streamer = ExpertStreamer(layers=n_layers, experts=n_experts, slots=layout.slots, reader=reader,
                                       uploader=self, record_bytes=layout.record_bytes,
                                       tuning=StreamerTuning(policy=policy, max_inflight=max_inflight),
                                       on_map_change=self.map.set,
                                       placement=placement)  # residency/miss_placement.py: None uploads every miss
        self.map_bytes_written = 0
        self.flush_map()

    @property
    def nbytes(self) -> int:
        """GPU bytes besides the dense weights: slots, the staging ring, the map and the small routing buffers."""
        return (self.layout.total_bytes + self.uploads.nbytes + self.map.nbytes
                + self.small_bytes(self.n_layers))

    @staticmethod
    def small_bytes(n_layers) -> int:
        """route_slots, route_hist, status, guard_info, no_args."""
        return 4 * MAX_TOP_K * (1 + n_layers) + 48

    @staticmethod
    def overhead_bytes(record_bytes, n_layers, n_experts, upload="staging", ring_buffers=4) -> int:
        """What `nbytes` adds to the slots, known before the pool exists (for the budget)."""
        ring = ((record_bytes + 3) & ~3) * ring_buffers if upload == "staging" else 0
        return ring + 4 * n_layers * n_experts + ExpertPool.small_bytes(n_layers)

    # the streamer's uploader
    def upload(self, slot, data):
        b, offset = self.layout.locate(slot)
        return self.uploads.upload(self.buffers[b], offset, data)

    def flush_map(self) -> int:
        """Send the residency map's changes to the GPU (before the submit that routes through them)."""
        n = self.map.flush(lambda off, view: self.gpu.queue.writeBuffer(self.slot_map, off, js_bytes(view)))
        self.map_bytes_written += n
        return n

    async def load_all(self, meter=None):
        """Page every expert in (a pool with a slot for each): layer by layer through the streamer; `meter`: an
        UploadMeter (upload_meter.py) told each layer's records."""
        if self.layout.slots < self.n_layers * self.n_experts:
            raise ValueError(f"load_all needs {self.n_layers * self.n_experts} slots, the pool has "
                             f"{self.layout.slots}")
        for layer in range(self.n_layers):
            slots = await self.streamer.ensure(layer, range(self.n_experts))
            self.streamer.release(set(slots))
            if meter is not None:
                meter.add(self.n_experts * self.layout.record_bytes)
        self.flush_map()

    async def settle(self):
        """Wait until no record load (a prefetch left running after the last token) is in flight."""
        while self.streamer.inflight:
            await asyncio.sleep(0.001)

    async def read_status(self) -> dict:
        """GPU-side counters (one readback; diagnostics only): how often the residency kernel found an absent
        expert and stopped the token."""
        raw = await Readback(self.gpu).read(self.status, 0, 16)
        return {"gpu_stops": struct.unpack("<I", raw[:4])[0]}

    async def verify(self, reader) -> dict:
        """Read every pool buffer back and compare each resident slot with its record in the store, and the GPU
        slot map with the CPU's. Slow (whole pool readback): for tests and diagnostics."""
        await self.settle()
        rb = Readback(self.gpu)
        stride = self.layout.slot_stride
        bad, checked = [], 0
        for b, buf in enumerate(self.buffers):
            data = await rb.read(buf, 0, self.layout.buffer_bytes(b))
            for i in range(self.layout.slots_in_buffer(b)):
                slot = b * self.layout.slots_per_buffer + i
                key = self.streamer.slot_key(slot)
                if key is None:
                    continue
                got = await reader.read_record(*key)
                want = got.to_bytes() if hasattr(got, "to_bytes") else bytes(got)  # a JS Uint8Array from Node's fs
                checked += 1
                if data[i * stride:i * stride + len(want)] != want:
                    bad.append([slot, key[0], key[1]])
        gpu_map = await rb.read(self.slot_map, 0, self.map.nbytes)
        cpu_map = memoryview(self.map.entries).cast("B").tobytes()
        return {"slots_checked": checked, "slots_bad": bad, "map_equal": gpu_map == cpu_map}

    def release(self):
        for b in self.buffers:
            b.destroy()
        self.buffers.clear()
        self.uploads.release()
        for b in (self.slot_map, self.route_slots, self.route_hist, self.status, self.guard_info, self.no_args):
            b.destroy()


class StreamingKernels(Kernels):
    """Kernels whose routed-expert products read the streamed pool (for PoolPart weights)."""

    def __init__(self, gpu, pipelines, step_buffer, pool: ExpertPool, **kw):
        super().__init__(gpu, pipelines, step_buffer, **kw)
        self.pool = pool
        self.splits = []  # (layer, index of its residency check in the dispatch list, route_ids buffer, k)
        self.lookahead = None  # a RouterLookAhead (lookahead.py): its guesses are recorded before each check
        self.after_check = None  # (kern, dl, layer) -> records dispatches right after each check (cpu_tier_path.py)
        # (kern, dl, layer) -> records dispatches right after a layer's routed sum (a model calls it: gemma4's
        # decode.py), where the CPU tier's row joins a sum the model normalises
        self.after_combine = None

    def moe_matvec(self, dl, pool, rows, k, x, y, route, x_base=0, x_stride=0, label=""):
        if not isinstance(pool, PoolPart):
            return super().moe_matvec(dl, pool, rows, k, x, y, route, x_base, x_stride, label)
        if k > MAX_TOP_K:
            raise ValueError(f"top-{k} routing: the pool kernels handle at most {MAX_TOP_K} experts per token")
        if pool.rows != rows:
            raise ValueError(f"{pool.name}: {pool.rows} rows per expert, the model asked for {rows}")
        if not self.splits or self.splits[-1][0] != pool.layer:
            self.residency_check(dl, pool.layer, k, route.picks)
        lay = self.pool.layout
        nb = pool.cols // 32
        lanes = lanes_for(nb, self.lane_cap)
        groups = ((rows + 64 // lanes - 1) // (64 // lanes), k)
        for b, buf in enumerate(self.pool.buffers):
            params = {"rows": rows, "nb": nb, "x_base": x_base, "x_stride": x_stride, "buf": b,
                      "spb": lay.slots_per_buffer, "stride": lay.slot_stride, "codes_off": pool.codes_off,
                      "scales_off": pool.scales_off}
            binds = {1: x, 2: y, 3: buf, 5: self.pool.route_slots}
            if pool.fmt in ("q8", "q4"):  # the scales sub-plane, read through the same buffer
                binds[4] = buf
            self.record(dl, "moe_pool_matvec.wgsl", {"WFMT": pool.fmt, "XFMT": xfmt(self, pool.fmt), "LANES": lanes,
                                                    "STAGED_BLOCKS": nb},
                        binds, groups, f"{label or pool.name}@pool{b}", params)

    def residency_check(self, dl, layer, k, route_ids):
        # a placeholder: the check's bind group needs the guard's indirect-args buffer, which can only be sized
        # once the whole token is recorded (finish() fills it in). The look-ahead goes before the check, so a token
        # stopped by it has the guesses for the next layers too.
        if self.lookahead is not None:
            self.lookahead.record(self, dl, layer)
        self.splits.append((layer, dl.count, route_ids, k))
        dl.dispatch(None, None, 1, 1, 1, f"ffn_moe_residency-{layer}")
        if self.after_check is not None:
            self.after_check(self, dl, layer)

    def finish(self, dl, args=None):
        """Put the residency checks into the recorded list. `args`: the indirect-args buffer of the guarded part
        of the token (early-stop routing: entry j belongs to dispatch first_check + j), or None for no guard."""
        pool = self.pool
        g0 = self.splits[0][1] if self.splits else 0
        write_buffer(self.gpu, pool.guard_info, 0, struct.pack("<4I", dl.count - g0 if args is not None else 0,
                                                               0, 0, 0))
        pipe = self.pipes.get("moe_residency.wgsl")
        for layer, index, route_ids, k in self.splits:
            params = self.params("moe_residency.wgsl", {}, {"map_base": layer * pool.n_experts, "k": k,
                                                            "layer": layer, "guard_from": index - g0 + 1},
                                 label=f"residency-{layer}")
            bg = self.pipes.bind_group(pipe, {0: params, 1: route_ids, 2: pool.slot_map, 3: pool.route_slots,
                                              4: pool.status, 5: pool.route_hist,
                                              6: args if args is not None else pool.no_args, 7: pool.guard_info},
                                       f"ffn_moe_residency-{layer}")
            dl.ops[index] = js.Array.of(0, pipe, bg, 1, 1, 1)
