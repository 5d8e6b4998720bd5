"""The prefill's causal attention over a chunk of rows (shaders/attention_rows.wgsl through ChunkKernels.attention:
up to 8 query heads of one KV head per workgroup, each K/V word loaded once for them) on a real WebGPU device (Dawn on
lavapipe in Node, through Pyodide) against numpy.

Cases: the real models' 16 query heads on 2 KV heads (a group of 8: one workgroup per KV head) at head_dim 256 and
at 64, a group of 16 (two workgroups of 8 per KV head), a group of 3 (one workgroup of 3), no grouping; a chunk from position 0 and one after cached positions
(the cache holds rows before the chunk), a short chunk of a longer recorded one (rows past n not written), more than
one 64-position block per row; f16 and f32 KV caches; each row's positions split over 4 or 2 parts of 64 lanes (a
GPU's form) over two rounds, and rows shorter than one part's block; a sliding window over a ring of rows (gemma4's
sliding-window layers: each row sees its last `window` positions, position p at ring row p % ring rows).
"""
import json

import numpy as np
import pytest

from diskformer.node_engine import run_in_node
from node_helpers import KERNEL_HARNESS


NODE_CODE = KERNEL_HARNESS + r'''
from py_engine.gpu.chunk_kernels import ChunkKernels
from py_engine.gpu.chunk_shapes import AttentionShape

async def main(args):
    d, spec, gpu, pipes = await kernel_device(args)
    step = create_buffer(gpu, 16, UNIFORM | COPY_DST, "step")
    rb = Readback(gpu)
    grids = {}
    for a in spec:
        n = a["name"]
        kern = Kernels(gpu, pipes, step, kv_format=a["kv"])
        chunk = create_buffer(gpu, 16, UNIFORM | COPY_DST, "chunk")
        write_buffer(gpu, chunk, 0, struct.pack("<4I", a["n"], a["pos0"], 0, 0))
        ck = ChunkKernels(kern, chunk, a["T"])
        q, kc, vc, y = (upload(gpu, (d / f"{n}_{s}.bin").read_bytes()) for s in ("q", "k", "v", "y0"))
        dl = DispatchList()
        async with GpuErrorScope(gpu, "recording " + n):
            shape = AttentionShape(a["n_head"], a["n_kv"], a["hd"], a["scale"], a["q_stride"], a["out_stride"])
            ck.attention(dl, q, kc, vc, y, shape, splits=a["splits"],
                         window=tuple(a["window"]) if a["window"] else None)
        grids[n] = [int(dl.ops[0][3]), int(dl.ops[0][4])]
        dl.submit(gpu)
        (d / f"out_{n}.bin").write_bytes(await rb.read(y, 0, int(y.size)))
        check_errors(gpu, n)
    return {"grids": grids}
'''

SENTINEL = -7.25
# name, n_head, n_kv, hd, T, n, pos0, kv, parts per row (None: the engine's choice, 1 on lavapipe)
CASES = [
    ("real_hd256", 16, 2, 256, 8, 8, 70, "f16", None),
    ("real_hd256_f32", 16, 2, 256, 4, 3, 0, "f32", None),
    ("g8_hd64", 16, 2, 64, 16, 11, 130, "f16", None),
    ("g3_hd128", 6, 2, 128, 8, 8, 5, "f16", None),
    ("g16_hd64", 32, 2, 64, 4, 4, 66, "f16", None),
    ("mha_hd64", 4, 4, 64, 8, 6, 64, "f32", None),
    # a GPU's form: 4 parts of 64 lanes per row, each a quarter of the positions, merged at the end; rows over two
    # rounds of 4 blocks (parts 2 and 3 short or empty in the second), rows shorter than one part's block (parts
    # 1-3 without a position), 2 parts
    ("real_hd256_split4", 16, 2, 256, 8, 8, 300, "f16", 4),
    ("real_hd256_split4_short", 16, 2, 256, 4, 4, 0, "f32", 4),
    ("g3_hd128_split2", 6, 2, 128, 8, 7, 100, "f16", 2),
]
# sliding windows: name -> (window, ring rows); rows past the window's start, rings wrapped, windows not a multiple
# of 64 and longer than one block
WINDOWS = {"win32_ring95_f16": (32, 95), "win32_ring95_f32": (32, 95), "win16_ring79_split4": (16, 79),
           "win100_ring107": (100, 107)}
CASES += [
    ("win32_ring95_f16", 8, 4, 64, 64, 40, 60, "f16", None),
    ("win32_ring95_f32", 8, 4, 64, 64, 40, 60, "f32", None),
    ("win16_ring79_split4", 4, 2, 64, 64, 64, 3, "f16", 4),
    ("win100_ring107", 4, 1, 128, 8, 8, 150, "f16", None),
    # gemma4's global heads of 512 values (4 value pairs per lane), 4 query heads per workgroup
    ("g4_hd512", 16, 2, 512, 8, 8, 70, "f16", None),
    ("g4_hd512_split4", 8, 2, 512, 4, 4, 130, "f32", 4),
]


def _kv_words(x, kv):
    """A cache of f32 values [pos, kv head, hd] in the KvWord layout: f16 pairs in a u32, or f32 pairs."""
    return x.astype(np.float16).tobytes() if kv == "f16" else x.astype(np.float32).tobytes()


@pytest.fixture(scope="module")
def attn_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("attention_rows")
    rng = np.random.default_rng(9)
    spec, refs = [], {}
    for name, nh, nkv, hd, T, n, pos0, kv, splits in CASES:
        q_stride, out_stride = nh * hd + 6, nh * hd + 2  # rows wider than the heads (the engine's qg rows)
        q = rng.standard_normal((T, q_stride)).astype(np.float32)
        total = pos0 + T
        k = rng.standard_normal((total, nkv, hd)).astype(np.float32)
        v = rng.standard_normal((total, nkv, hd)).astype(np.float32)
        if kv == "f16":  # what the cache holds
            k, v = k.astype(np.float16).astype(np.float32), v.astype(np.float16).astype(np.float32)
        window, ring = WINDOWS.get(name, (None, total))
        kr, vr = np.zeros((ring, nkv, hd), np.float32), np.zeros((ring, nkv, hd), np.float32)
        for pos in range(total):  # a ring keeps the last `ring` positions (a full cache: every one)
            kr[pos % ring], vr[pos % ring] = k[pos], v[pos]
        (d / f"{name}_q.bin").write_bytes(q.tobytes())
        (d / f"{name}_k.bin").write_bytes(_kv_words(kr, kv))
        (d / f"{name}_v.bin").write_bytes(_kv_words(vr, kv))
        (d / f"{name}_y0.bin").write_bytes(np.full(T * out_stride, SENTINEL, np.float32).tobytes())
        scale = hd ** -0.5
        ref = np.full((T, out_stride), SENTINEL)
        group = nh // nkv
        for t in range(n):
            length = pos0 + t + 1
            first = max(0, length - window) if window else 0
            for h in range(nh):
                kh, vh = k[first:length, h // group], v[first:length, h // group]
                s = kh.astype(np.float64) @ q[t, h * hd:(h + 1) * hd].astype(np.float64) * scale
                w = np.exp(s - s.max())
                ref[t, h * hd:(h + 1) * hd] = (w / w.sum()) @ vh.astype(np.float64)
        refs[name] = ref
        spec.append(dict(name=name, n_head=nh, n_kv=nkv, hd=hd, T=T, n=n, pos0=pos0, kv=kv, scale=scale,
                         q_stride=q_stride, out_stride=out_stride, splits=splits,
                         window=(window, ring) if window else None))
    (d / "spec.json").write_text(json.dumps(spec))
    info = run_in_node(NODE_CODE, {"dir": str(d)}, mounts=[d], timeout=600)
    return d, refs, info


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_chunk_attention_against_numpy(attn_run, case):
    d, refs, _ = attn_run
    name = case[0]
    ref = refs[name]
    got = np.frombuffer((d / f"out_{name}.bin").read_bytes(), np.float32).reshape(ref.shape)
    untouched = ref == SENTINEL
    assert np.array_equal(got[untouched], ref[untouched]), "wrote outside the chunk's rows / the heads"
    assert np.abs(got - ref).max() <= 2e-6 * np.abs(ref[~untouched]).max() + 1e-6


def test_query_heads_of_a_kv_head_share_workgroups(attn_run):
    """Up to 8 query heads of one KV head per workgroup (and hd/2 · heads <= 1024): (KV heads · ceil(group / 8), T)."""
    grids = attn_run[2]["grids"]
    assert grids["real_hd256"] == [2, 8] and grids["g8_hd64"] == [2, 16] and grids["g16_hd64"] == [4, 4]
    assert grids["g3_hd128"] == [2, 8] and grids["mha_hd64"] == [4, 8] and grids["real_hd256_split4"] == [2, 8]
