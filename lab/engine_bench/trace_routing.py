"""Routing by a trace in the streamed bench (`diskformer bench --routing-trace`).

Random weights route uniformly, so the pool's hit rate on them says nothing about a real model. Here each decode
step's routed ids are replaced, layer by layer on the GPU, by a trace with the reuse statistics published for real
routers (lab/policy_lab/traces.py, generated on the host and passed in). The engine's product path is untouched:
TraceStoreDecoder records one more small dispatch per MoE layer (bench_trace_route.wgsl, after the router's top-k,
before the residency check) and writes the token's trace row before each step. Batched prefill chunks route as
the model does (their ids live in the chunk's own buffers); the trace drives the decode.
"""
import struct

from py_engine.engine.expert_pool import StreamingKernels
from py_engine.engine.store_decoder import StoreDecoder
from py_engine.gpu.buffers import storage_buffer, uniform_buffer, write_buffer
from . import bench_pipelines


class TraceKernels(StreamingKernels):
    trace_row = None

    def residency_check(self, dl, layer, k, route_ids):
        if self.trace_row is None:
            self.trace_row = storage_buffer(self.gpu, 4 * k * self.pool.n_layers, "bench.trace_row")
            self.bench_pipes = bench_pipelines(self.gpu)
        shader = "bench_trace_route.wgsl"
        pipe = self.bench_pipes.get(shader)
        params = uniform_buffer(self.gpu, self.bench_pipes.params_layout(shader).pack({"base": layer * k, "k": k}),
                                f"trace_route-{layer}")
        bg = self.bench_pipes.bind_group(pipe, {0: params, 1: self.trace_row, 2: route_ids}, f"trace_route-{layer}")
        dl.dispatch(pipe, bg, 1, 1, 1, f"bench_trace_route-{layer}")
        super().residency_check(dl, layer, k, route_ids)


class TraceStoreDecoder(StoreDecoder):
    kernels_class = TraceKernels
    trace = ()  # trace[t][layer] = the k expert ids of step t (cycled)
    trace_steps = 0

    async def step(self, token: int):
        if self.trace:
            row = self.trace[self.trace_steps % len(self.trace)]
            write_buffer(self.gpu, self.kern.trace_row, 0, struct.pack(f"<{sum(map(len, row))}I",
                                                                        *(e for picks in row for e in picks)))
            self.trace_steps += 1
        return await super().step(token)

    def release(self):
        if self.kern.trace_row is not None:
            self.kern.trace_row.destroy()
        super().release()
