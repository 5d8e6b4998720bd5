"""The prefill's Gated DeltaNet conv over a chunk (shaders/gdn_conv_chunk.wgsl, every (channel, row) at once, then
gdn_conv_keep.wgsl storing the chunk's last inputs in the ring; ChunkKernels.gdn_conv) on a real WebGPU device (Dawn
on lavapipe in Node, through Pyodide) against numpy's causal conv + SiLU over the whole sequence.

A sequence fed in chunks: from position 0 over a ring full of garbage (a new sequence reads none of it), a chunk of
fewer rows than taps (its first rows read the ring, the ring keeps some of the previous chunk's inputs), a short chunk
of a longer recorded one (rows past n neither written nor kept), and a channel count that is not a multiple of the
workgroup. After each chunk the ring holds the last K inputs in their slots (position q in slot q % K).
"""
import json

import numpy as np
import pytest

from diskformer.node_engine import run_in_node
from node_helpers import KERNEL_HARNESS


NODE_CODE = KERNEL_HARNESS + r'''
from py_engine.gpu.chunk_kernels import ChunkKernels

async def main(args):
    d, spec, gpu, pipes = await kernel_device(args)
    step = create_buffer(gpu, 16, UNIFORM | COPY_DST, "step")
    kern = Kernels(gpu, pipes, step)
    rb = Readback(gpu)
    C, K, T = spec["channels"], spec["taps"], spec["T"]
    w = upload(gpu, (d / "in_w.bin").read_bytes(), "w")
    window = upload(gpu, (d / "in_window.bin").read_bytes(), "window")
    chunk = create_buffer(gpu, 16, UNIFORM | COPY_DST, "chunk")
    ck = ChunkKernels(kern, chunk, T)
    for i, (pos0, n) in enumerate(spec["chunks"]):
        x = upload(gpu, (d / f"in_x{i}.bin").read_bytes(), "x")
        y = upload(gpu, (d / "in_y0.bin").read_bytes(), "y")
        write_buffer(gpu, chunk, 0, struct.pack("<4I", n, pos0, 0, 0))
        dl = DispatchList()
        async with GpuErrorScope(gpu, f"chunk {i}"):
            ck.gdn_conv(dl, x, w, window, y, C, K)
        dl.submit(gpu)
        (d / f"out_y{i}.bin").write_bytes(await rb.read(y, 0, int(y.size)))
        (d / f"out_window{i}.bin").write_bytes(await rb.read(window, 0, int(window.size)))
        check_errors(gpu, f"chunk {i}")
    return {}
'''

C, K, T = 300, 4, 16
CHUNKS = [(0, 16), (16, 2), (18, 11)]
SENTINEL = -7.25


@pytest.fixture(scope="module")
def conv_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("gdn_conv_chunk")
    rng = np.random.default_rng(3)
    seq = rng.standard_normal((sum(n for _, n in CHUNKS), C)).astype(np.float32)
    w = rng.standard_normal((C, K)).astype(np.float32)
    (d / "in_w.bin").write_bytes(w.tobytes())
    (d / "in_window.bin").write_bytes(rng.standard_normal(K * C).astype(np.float32).tobytes())  # garbage
    (d / "in_y0.bin").write_bytes(np.full(T * C, SENTINEL, np.float32).tobytes())
    for i, (pos0, n) in enumerate(CHUNKS):
        x = rng.standard_normal((T, C)).astype(np.float32)  # rows past n: never read
        x[:n] = seq[pos0:pos0 + n]
        (d / f"in_x{i}.bin").write_bytes(x.tobytes())
    (d / "spec.json").write_text(json.dumps({"channels": C, "taps": K, "T": T, "chunks": CHUNKS}))
    run_in_node(NODE_CODE, {"dir": str(d)}, mounts=[d], timeout=300)
    return d, seq, w


def _reference(seq, w):
    """y[q, c] = silu(Σ_j seq[q - (K-1) + j, c] · w[c, j]), zeros before position 0 (f64)."""
    padded = np.concatenate([np.zeros((K - 1, C)), seq.astype(np.float64)])
    acc = sum(padded[j:j + len(seq)] * w[:, j].astype(np.float64) for j in range(K))
    return acc / (1 + np.exp(-acc))


@pytest.mark.parametrize("i", range(len(CHUNKS)))
def test_chunk_conv_rows(conv_run, i):
    d, seq, w = conv_run
    pos0, n = CHUNKS[i]
    y = np.frombuffer((d / f"out_y{i}.bin").read_bytes(), np.float32).reshape(T, C)
    ref = _reference(seq, w)[pos0:pos0 + n]
    assert np.abs(y[:n] - ref).max() <= 1e-5 * np.abs(ref).max()
    assert (y[n:] == SENTINEL).all(), "rows past the chunk's n were written"


@pytest.mark.parametrize("i", range(len(CHUNKS)))
def test_ring_holds_the_last_inputs(conv_run, i):
    d, seq, _ = conv_run
    pos0, n = CHUNKS[i]
    ring = np.frombuffer((d / f"out_window{i}.bin").read_bytes(), np.float32).reshape(K, C)
    end = pos0 + n
    for q in range(max(0, end - K), end):
        assert np.array_equal(ring[q % K], seq[q]), f"slot {q % K} does not hold position {q}"
