"""Split (flash-decoding) decode attention on a real WebGPU device (Dawn on lavapipe in Node) against numpy.

Kernels.attention records attention.wgsl (S workgroups per q head, S fixed at record time from the cache length)
and attention_combine.wgsl (none for S = 1: the one split writes the output) once; each case then replays that
list at several positions, as the engine does per token, so the split boundaries move at run time: 1 and 2
positions, around S and around whole 64-position chunks, long contexts and the cache's last slot. The cases set
the GPU's split cap (32) also on lavapipe, which by itself takes one split (a CPU adapter). One Node process
runs every case (start-up costs seconds).
"""
import json

import numpy as np
import pytest

from diskformer.node_engine import run_in_node
from node_helpers import KERNEL_HARNESS


NODE_CODE = KERNEL_HARNESS + r'''
from py_engine.gpu.kernels import DecodeAttentionShape

async def main(args):
    d, spec, gpu, pipes = await kernel_device(args)
    step = create_buffer(gpu, 16, UNIFORM | COPY_DST, "step")
    rb = Readback(gpu)
    splits = {}
    for case in spec:
        kern = Kernels(gpu, pipes, step, kv_format=case["kv"])
        if case["max_splits"]:
            kern.attention_max_splits = case["max_splits"]   # the GPU's split counts, also on a CPU adapter
        dl = DispatchList()
        outs = []
        async with GpuErrorScope(gpu, "recording " + case["name"]):
            for li, layer in enumerate(case["layers"]):   # several layers share the partials buffer
                q = upload(gpu, (d / f"{layer}_q.bin").read_bytes())
                kc = upload(gpu, (d / f"{layer}_k.bin").read_bytes())
                vc = upload(gpu, (d / f"{layer}_v.bin").read_bytes())
                y = storage_buffer(gpu, case["n_head"] * case["hd"] * 4, f"out{li}")
                shape = DecodeAttentionShape(case["n_head"], case["n_kv"], case["hd"], case["scale"])
                kern.attention(dl, q, kc, vc, y, shape, n_ctx=case.get("n_ctx_arg"))
                outs.append(y)
        splits[case["name"]] = [int(dl.ops[0][3]), int(dl.ops[0][4]), dl.count]  # split grid, dispatches
        for n in case["n_past"]:
            write_buffer(gpu, step, 0, struct.pack("<4I", 0, n - 1, n, 0))
            dl.submit(gpu)
            for li, y in enumerate(outs):
                data = await rb.read(y, 0, int(y.size))
                (d / f"out_{case['name']}_{li}_{n}.bin").write_bytes(data)
        check_errors(gpu, case["name"])
    return {"splits": splits, "cpu": gpu.info["isFallbackAdapter"]}
'''


def reference(q, k, v, n_head, n_kv, hd, scale, n):
    """softmax over positions 0 .. n-1 of scale · q_h·k_t, times v, in float64; GQA head h -> h // (n_head/n_kv)."""
    out = []
    for h in range(n_head):
        g = h // (n_head // n_kv)
        s = k[:n, g].astype(np.float64) @ q[h * hd:(h + 1) * hd].astype(np.float64) * scale
        p = np.exp(s - s.max())
        out.append((p / p.sum()) @ v[:n, g].astype(np.float64))
    return np.concatenate(out)


class Cases:
    def __init__(self, folder):
        self.dir = folder
        self.spec = []
        self.data = {}

    def layer(self, name, q, k, v):
        for part, a in (("q", q), ("k", k), ("v", v)):
            (self.dir / f"{name}_{part}.bin").write_bytes(np.ascontiguousarray(a).tobytes())
        self.data[name] = (q, k, v)
        return name

    def add(self, name, kv, heads, n_ctx, n_past, layers, scale=None, n_ctx_arg=None, tol=(2e-4, 2e-5),
            max_splits=32):
        """heads: (query heads, KV heads, head size)."""
        n_head, n_kv, hd = heads
        self.spec.append(dict(name=name, kv=kv, n_head=n_head, n_kv=n_kv, hd=hd, n_ctx=n_ctx, n_past=n_past,
                              layers=layers, scale=scale or hd ** -0.5, n_ctx_arg=n_ctx_arg, tol=tol,
                              max_splits=max_splits))


def splits_for(n_ctx):
    return max(1, min(32, -(-n_ctx // 64)))


def random_layer(c, name, rng, n_head, n_kv, hd, n_ctx, dt, q_scale=1.0):
    q = (rng.standard_normal(n_head * hd) * q_scale).astype(np.float32)
    k = rng.standard_normal((n_ctx, n_kv, hd)).astype(dt)
    v = rng.standard_normal((n_ctx, n_kv, hd)).astype(dt)
    return c.layer(name, q, k, v)


@pytest.fixture(scope="module")
def split_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("attention_split")
    rng = np.random.default_rng(11)
    c = Cases(d)
    # the sweep: head dims x GQA ratios, one recorded list replayed at positions around S and chunk edges
    n_ctx = 1024
    S = splits_for(n_ctx)
    sweep = [1, 2, S - 1, S + 1, 63, 65, 700, n_ctx]   # n_ctx: the token at the cache's last slot
    for hd in (64, 128, 256):
        for ratio in (1, 4, 8):
            n_kv = 2
            nm = f"hd{hd}_gqa{ratio}_f16"
            c.add(nm, "f16", (n_kv * ratio, n_kv, hd), n_ctx, sweep,
                  [random_layer(c, nm, rng, n_kv * ratio, n_kv, hd, n_ctx, np.float16)])
    for hd, ratio in ((64, 1), (128, 4), (256, 8)):
        nm = f"hd{hd}_gqa{ratio}_f32"
        c.add(nm, "f32", (2 * ratio, 2, hd), n_ctx, sweep,
              [random_layer(c, nm, rng, 2 * ratio, 2, hd, n_ctx, np.float32)])
    # a cache longer than 32 splits of 64: chunks of 128 and more per split, a last split partly filled
    nm = "long_f16"
    c.add(nm, "f16", (4, 2, 128), 2100, [2047, 2049, 2100],
          [random_layer(c, nm, rng, 4, 2, 128, 2100, np.float16)])
    # small caches: one split (S = 1), and S = 4 around S
    for n_ctx_s, pts in ((40, [1, 2, 39, 40]), (200, [1, 3, 5, 64, 65, 200])):
        nm = f"small{n_ctx_s}_f16"
        c.add(nm, "f16", (8, 1, 256), n_ctx_s, pts, [random_layer(c, nm, rng, 8, 1, 256, n_ctx_s, np.float16)])
    # n_ctx given explicitly, smaller than what the buffers hold (the splits follow the argument)
    nm = "explicit_ctx_f32"
    c.add(nm, "f32", (4, 2, 64), 300, [1, 299, 300], [random_layer(c, nm, rng, 4, 2, 64, 512, np.float32)],
          n_ctx_arg=300)
    # the adapter's own split count (one split on a CPU adapter such as lavapipe)
    nm = "adapter_default_f16"
    c.add(nm, "f16", (4, 2, 64), 1024, [1, 65, 1024], [random_layer(c, nm, rng, 4, 2, 64, 1024, np.float16)],
          max_splits=None)
    # two layers in one list share the partials buffer: each must read its own
    c.add("two_layers_f16", "f16", (8, 2, 128), 512, [1, 100, 512],
          [random_layer(c, "two_layers_a", rng, 8, 2, 128, 512, np.float16),
           random_layer(c, "two_layers_b", rng, 8, 2, 128, 512, np.float16)])
    # large-magnitude scores: near one-hot softmax (scores of thousands), in f16 and f32
    for kv, dt in (("f16", np.float16), ("f32", np.float32)):
        nm = f"huge_{kv}"
        c.add(nm, kv, (8, 2, 128), 1024, [1, 17, 700, 1024],
              [random_layer(c, nm, rng, 8, 2, 128, 1024, dt, q_scale=400.0)], tol=(2e-3, 2e-3))
    # scores rising with position: the early splits' terms underflow to 0 against the last split's max, and
    # per-split maxima differ by thousands (the combine's rescaling must not overflow)
    n_ctx_r, hd_r = 1024, 128
    direction = rng.standard_normal(hd_r).astype(np.float32)
    direction /= np.linalg.norm(direction)
    k = (np.arange(n_ctx_r, dtype=np.float32)[:, None, None] * 0.5 * direction[None, None, :]
         + 0.01 * rng.standard_normal((n_ctx_r, 1, hd_r))).astype(np.float32)
    v = rng.standard_normal((n_ctx_r, 1, hd_r)).astype(np.float32)
    q = np.tile(direction * 50.0, 4).astype(np.float32)
    for kv, dt in (("f16", np.float16), ("f32", np.float32)):
        nm = f"rising_{kv}"
        c.add(nm, kv, (4, 1, hd_r), n_ctx_r, [2, 65, 700, 1024], [c.layer(nm, q, k.astype(dt), v.astype(dt))],
              tol=(2e-3, 2e-3))
        # and falling: the max sits in split 0, the rest underflow
        nm = f"falling_{kv}"
        c.add(nm, kv, (4, 1, hd_r), n_ctx_r, [2, 65, 700, 1024], [c.layer(nm, -q, k.astype(dt), v.astype(dt))],
              tol=(2e-3, 2e-3))
    (d / "spec.json").write_text(json.dumps(c.spec))
    info = run_in_node(NODE_CODE, {"dir": str(d)}, mounts=[d], timeout=300)
    return c, info


def _check(c, case):
    rtol, atol = case["tol"]
    for li, layer in enumerate(case["layers"]):
        q, k, v = c.data[layer]
        for n in case["n_past"]:
            got = np.frombuffer((c.dir / f"out_{case['name']}_{li}_{n}.bin").read_bytes(), np.float32)
            want = reference(q, k, v, case["n_head"], case["n_kv"], case["hd"], case["scale"], n)
            np.testing.assert_allclose(got[:want.size], want, rtol=rtol, atol=atol,
                                       err_msg=f"{case['name']} layer {li} at {n} positions")


def _case(c, name):
    return next(s for s in c.spec if s["name"] == name)


SWEEP = [f"hd{hd}_gqa{r}_f16" for hd in (64, 128, 256) for r in (1, 4, 8)] + \
    ["hd64_gqa1_f32", "hd128_gqa4_f32", "hd256_gqa8_f32"]


@pytest.mark.parametrize("name", SWEEP)
def test_head_dims_gqa_and_positions(split_run, name):
    c, _ = split_run
    _check(c, _case(c, name))


@pytest.mark.parametrize("name", ["long_f16", "small40_f16", "small200_f16", "explicit_ctx_f32",
                                  "adapter_default_f16"])
def test_cache_lengths(split_run, name):
    c, _ = split_run
    _check(c, _case(c, name))


def test_split_grid_follows_the_cache_length(split_run):
    """(q heads, splits) of the recorded split pass, and two dispatches (split, combine) per layer, one for S = 1."""
    _, info = split_run
    s = info["splits"]
    assert s["small40_f16"] == [8, 1, 1] and s["small200_f16"] == [8, 4, 2]
    assert s["hd64_gqa1_f16"] == [2, 16, 2] and s["hd256_gqa8_f16"] == [16, 16, 2]
    assert s["long_f16"] == [4, 32, 2] and s["explicit_ctx_f32"] == [4, 5, 2] and s["two_layers_f16"][2] == 4
    assert s["adapter_default_f16"] == ([4, 1, 1] if info["cpu"] else [4, 16, 2])


def test_layers_sharing_partials(split_run):
    c, _ = split_run
    _check(c, _case(c, "two_layers_f16"))


@pytest.mark.parametrize("name", ["huge_f16", "huge_f32", "rising_f16", "rising_f32", "falling_f16",
                                  "falling_f32"])
def test_large_magnitude_scores(split_run, name):
    c, _ = split_run
    _check(c, _case(c, name))
