"""The prefill's Gated DeltaNet recurrence over a chunk of rows (shaders/gdn_qk_scales.wgsl for every row's q/k
scales and q·k, then gdn_recurrent_cols.wgsl, through ChunkKernels.gdn_recurrent) against the numpy reference, at
the fixtures' head sizes and at the real models' (128 and 256): a chunk from position 0 (a fresh sequence, whatever the state buffer held), then a shorter chunk that goes on
from the state the first one left, as a prompt's chunks do.
"""
import json
import math

import numpy as np
import pytest

from diskformer.node_engine import run_in_node
from diskformer.reference import layers
from node_helpers import KERNEL_HARNESS


NODE_CODE = KERNEL_HARNESS + r'''
from py_engine.gpu.chunk_kernels import ChunkKernels
from py_engine.gpu.chunk_shapes import DeltaNetShape

async def main(args):
    d, spec, gpu, pipes = await kernel_device(args)
    step = create_buffer(gpu, 16, UNIFORM | COPY_DST, "step")
    kern = Kernels(gpu, pipes, step)
    rb = Readback(gpu)
    for case in spec:
        name, T = case["name"], case["T"]
        nk, nv, dk, dv = case["shape"]
        chunk = create_buffer(gpu, 16, UNIFORM | COPY_DST, "chunk")
        ck = ChunkKernels(kern, chunk, T)
        fixed = {k: upload(gpu, (d / f"{name}_{k}.bin").read_bytes(), k) for k in ("dt", "a", "junk")}
        state = fixed["junk"]  # garbage: a chunk at position 0 must not read it
        out = storage_buffer(gpu, 4 * T * nv * dv, "out")
        qk_scales = storage_buffer(gpu, 16 * T * nk, "qk_scales")
        for i, (n, pos0) in enumerate(case["parts"]):
            qkv = upload(gpu, (d / f"{name}_qkv{i}.bin").read_bytes(), "qkv")
            gates = upload(gpu, (d / f"{name}_g{i}.bin").read_bytes(), "gates")
            write_buffer(gpu, chunk, 0, struct.pack("<4I", n, pos0, 0, 0))
            dl = DispatchList()
            async with GpuErrorScope(gpu, f"{name} part {i}"):
                ck.gdn_recurrent(dl, qkv, gates, (fixed["dt"], fixed["a"]), state, out, qk_scales,
                                 DeltaNetShape(nk, nv, dk, dv, case["eps"]))
            dl.submit(gpu)
            (d / f"{name}_out{i}.bin").write_bytes(await rb.read(out, 0, 4 * n * nv * dv))
            (d / f"{name}_state{i}.bin").write_bytes(await rb.read(state, 0, 4 * nv * dk * dv))
            check_errors(gpu, f"{name} part {i}")
    return {"cases": len(spec)}
'''

EPS = 1e-6
# (key heads, value heads, dk, dv): the fixtures' size, value heads tiled over key heads, the real models' sizes, a
# key size not a multiple of 16 (one lane per value column)
SHAPES = [(1, 2, 32, 32), (2, 4, 32, 80), (2, 4, 128, 128), (1, 2, 256, 64), (1, 2, 20, 40)]
T = 16
PARTS = [(T, 0), (11, T)]  # a full chunk from position 0, then 11 rows going on from it


def _case(d, rng, shape):
    nk, nv, dk, dv = shape
    name = "gdn_" + "_".join(map(str, shape))
    dt = rng.standard_normal(nv).astype(np.float32)
    a = -np.exp(rng.standard_normal(nv)).astype(np.float32)
    (d / f"{name}_dt.bin").write_bytes(dt.tobytes())
    (d / f"{name}_a.bin").write_bytes(a.tobytes())
    (d / f"{name}_junk.bin").write_bytes((rng.standard_normal(nv * dk * dv) * 100).astype(np.float32).tobytes())
    state = np.zeros((nv, dv, dk))
    key_head = np.arange(nv) % nk
    f = lambda x: x.astype(np.float64)  # noqa: E731
    want = []
    for i, (n, _) in enumerate(PARTS):
        q = rng.standard_normal((T, nk, dk)).astype(np.float32)
        k = rng.standard_normal((T, nk, dk)).astype(np.float32)
        v = rng.standard_normal((T, nv, dv)).astype(np.float32)
        gates = (rng.standard_normal((T, 2 * nv)) * 2).astype(np.float32)
        rows = np.concatenate([q.reshape(T, -1), k.reshape(T, -1), v.reshape(T, -1)], axis=1)
        (d / f"{name}_qkv{i}.bin").write_bytes(rows.astype(np.float32).tobytes())
        (d / f"{name}_g{i}.bin").write_bytes(gates.tobytes())
        outs = []
        for t in range(n):
            qn = layers.l2_norm(f(q[t]), EPS)[key_head] / math.sqrt(dk)
            kn = layers.l2_norm(f(k[t]), EPS)[key_head]
            beta = layers.sigmoid(f(gates[t, :nv]))
            g = layers.softplus(f(gates[t, nv:]) + f(dt)) * f(a)
            o = layers.gated_delta_rule(qn[None], kn[None], f(v[t])[None], g[None], beta[None], state)
            outs.append(o[0].ravel())
        # the GPU keeps S key-major: [head][key i][value j]
        want.append((np.concatenate(outs), state.transpose(0, 2, 1).ravel().copy()))
    return {"name": name, "T": T, "shape": list(shape), "parts": PARTS, "eps": EPS}, want


@pytest.fixture(scope="module")
def chunk_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("gdn_chunk")
    rng = np.random.default_rng(7)
    spec, want = [], {}
    for shape in SHAPES:
        case, w = _case(d, rng, shape)
        spec.append(case)
        want[case["name"]] = w
    (d / "spec.json").write_text(json.dumps(spec))
    info = run_in_node(NODE_CODE, {"dir": str(d)}, mounts=[d], timeout=300)
    assert info["cases"] == len(spec)
    return d, want


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "_".join(map(str, s)))
def test_chunk_recurrence_matches_numpy(chunk_run, shape):
    d, want = chunk_run
    name = "gdn_" + "_".join(map(str, shape))
    for i, (o, state) in enumerate(want[name]):
        got_o = np.frombuffer((d / f"{name}_out{i}.bin").read_bytes(), np.float32)
        got_s = np.frombuffer((d / f"{name}_state{i}.bin").read_bytes(), np.float32)
        np.testing.assert_allclose(got_o, o, rtol=2e-4, atol=2e-5, err_msg=f"o, part {i}")
        np.testing.assert_allclose(got_s, state, rtol=2e-4, atol=2e-5, err_msg=f"state, part {i}")
