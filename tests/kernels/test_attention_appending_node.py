"""Decode attention that norms, rotates and appends its own inputs (Kernels.attention_appending: one dispatch, plus
the combine) against the two dispatches it replaces (qk_rope_append, then attention), on a real WebGPU device (Dawn
on lavapipe in Node).

Each case records both forms over two copies of one cache, then replays them position after position as the
engine does per token: the outputs and the whole caches must agree bit for bit after every step. The caches start
with random rows everywhere, so a fused split that read the token's row from the cache (another workgroup writes it
in the same dispatch) would differ. Positions sit around split and chunk edges; GPU split counts are set also on
lavapipe (a CPU adapter takes one split). Each form is also checked against float64 at the last position.
"""
import json

import numpy as np
import pytest

from diskformer.node_engine import run_in_node
from diskformer.reference import layers
from node_helpers import KERNEL_HARNESS


NODE_CODE = KERNEL_HARNESS + r'''
from py_engine.gpu.kernels import DecodeAttentionShape

async def main(args):
    d, spec, gpu, pipes = await kernel_device(args)
    step = create_buffer(gpu, 16, UNIFORM | COPY_DST, "step")
    rb = Readback(gpu)
    grids = {}
    for case in spec:
        kern = Kernels(gpu, pipes, step, kv_format=case["kv"])
        if case["max_splits"]:
            kern.attention_max_splits = case["max_splits"]
        nh, nkv, hd = case["n_head"], case["n_kv"], case["hd"]
        x = upload(gpu, (d / f"{case['name']}_x.bin").read_bytes())
        norms = [upload(gpu, (d / f"{case['name']}_{t}.bin").read_bytes()) for t in ("wq", "wk")] \
            if case["norm"] else [None, None]
        shape = DecodeAttentionShape(nh, nkv, hd, hd ** -0.5, n_rot=case["n_rot"], eps=case["eps"],
                                     rope_base=case["base"], q_stride=case["q_stride"], k_base=case["k_base"],
                                     v_base=case["v_base"])
        forms = {}
        async with GpuErrorScope(gpu, "recording " + case["name"]):
            for form in ("two", "fused"):
                kc = upload(gpu, (d / f"{case['name']}_k.bin").read_bytes())
                vc = upload(gpu, (d / f"{case['name']}_v.bin").read_bytes())
                y = storage_buffer(gpu, nh * hd * 4, "out_" + form)
                dl = DispatchList()
                if form == "two":
                    q = storage_buffer(gpu, nh * hd * 4, "q")
                    kern.qk_rope_append(dl, x, q, *norms, kc, vc, shape)
                    kern.attention(dl, q, kc, vc, y, DecodeAttentionShape(nh, nkv, hd, hd ** -0.5))
                else:
                    kern.attention_appending(dl, x, *norms, kc, vc, y, shape)
                    grids[case["name"]] = [int(dl.ops[0][3]), int(dl.ops[0][4]), dl.count]
                forms[form] = (dl, y, kc, vc)
        for pos in case["positions"]:
            write_buffer(gpu, step, 0, struct.pack("<4I", 0, pos, pos + 1, 0))
            for form, (dl, y, kc, vc) in forms.items():
                dl.submit(gpu)
                for tag, b in (("y", y), ("k", kc), ("v", vc)):
                    (d / f"{case['name']}_{form}_{tag}_{pos}.bin").write_bytes(await rb.read(b, 0, int(b.size)))
        check_errors(gpu, case["name"])
    return {"grids": grids}
'''


def reference(case, x, wq, wk, kc, vc, pos):
    """float64 (the CPython reference's layers): the token's q/k heads normed and rotated, its row appended, then
    softmax attention over 0 .. pos."""
    nh, nkv, hd, qs = case["n_head"], case["n_kv"], case["hd"], case["q_stride"]
    q = np.stack([x[h * qs:h * qs + hd] for h in range(nh)]).astype(np.float64)
    k = x[case["k_base"]:case["k_base"] + nkv * hd].reshape(nkv, hd).astype(np.float64)
    v = x[case["v_base"]:case["v_base"] + nkv * hd].reshape(nkv, hd)
    if case["norm"]:
        q, k = layers.rms_norm(q, wq, case["eps"]), layers.rms_norm(k, wk, case["eps"])
    q, k = (layers.rope_neox(a[None], np.array([pos]), case["n_rot"], case["base"])[0] for a in (q, k))
    keys, vals = kc.astype(np.float64).copy(), vc.astype(np.float64).copy()
    keys[pos], vals[pos] = k, v
    return layers.causal_attention(q[None], keys[:pos + 1], vals[:pos + 1], pos, hd ** -0.5).ravel()


CASES = [  # name, kv, q heads, kv heads, head dim, rotary dims, norm, q stride (in head dims), cache rows, positions,
    #        split cap (None: the adapter's)
    ("gated_hd256_f16", "f16", 16, 2, 256, 64, True, 2, 1024, [0, 1, 63, 64, 65, 511, 700, 1023], 32),
    ("plain_hd128_f32", "f32", 8, 2, 128, 128, True, 1, 300, [0, 5, 127, 128, 299], 32),
    ("nonorm_hd64_f16", "f16", 4, 4, 64, 32, False, 1, 200, [0, 64, 130, 199], 32),
    ("adapter_hd128_f16", "f16", 8, 1, 128, 128, True, 2, 512, [3, 100, 511], None),
]


@pytest.fixture(scope="module")
def appending_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("attention_appending")
    rng = np.random.default_rng(23)
    spec, data = [], {}
    for name, kv, nh, nkv, hd, n_rot, norm, qs, n_ctx, positions, cap in CASES:
        dt = np.float16 if kv == "f16" else np.float32
        k_base = nh * qs * hd
        x = rng.standard_normal(k_base + 2 * nkv * hd).astype(np.float32)
        wq, wk = (rng.standard_normal(hd).astype(np.float32) for _ in range(2))
        kc, vc = (rng.standard_normal((n_ctx, nkv, hd)).astype(dt) for _ in range(2))
        for tag, a in (("x", x), ("wq", wq), ("wk", wk), ("k", kc), ("v", vc)):
            (d / f"{name}_{tag}.bin").write_bytes(np.ascontiguousarray(a).tobytes())
        spec.append(dict(name=name, kv=kv, n_head=nh, n_kv=nkv, hd=hd, n_rot=n_rot, eps=1e-6, base=1e7,
                         norm=norm, q_stride=qs * hd, k_base=k_base, v_base=k_base + nkv * hd, n_ctx=n_ctx,
                         positions=positions, max_splits=cap))
        data[name] = (x, wq, wk, kc, vc, dt)
    (d / "spec.json").write_text(json.dumps(spec))
    info = run_in_node(NODE_CODE, {"dir": str(d)}, mounts=[d], timeout=300)
    return d, spec, data, info


def _read(d, name, form, tag, pos, dt=np.float32):
    return np.frombuffer((d / f"{name}_{form}_{tag}_{pos}.bin").read_bytes(), dt)


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_fused_attention_has_the_two_dispatches_bits(appending_run, name):
    """The output and both caches, after every step: bit for bit (the caches' other rows untouched by both)."""
    d, spec, data, _ = appending_run
    case = next(s for s in spec if s["name"] == name)
    dt = data[name][5]
    for pos in case["positions"]:
        for tag, t in (("y", np.float32), ("k", dt), ("v", dt)):
            two, fused = _read(d, name, "two", tag, pos, t), _read(d, name, "fused", tag, pos, t)
            assert two.tobytes() == fused.tobytes(), f"{name}: {tag} differs at position {pos}"


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_fused_attention_against_float64(appending_run, name):
    """At the last position, with every earlier step's row appended as the replay left it."""
    d, spec, data, _ = appending_run
    case = next(s for s in spec if s["name"] == name)
    x, wq, wk, kc, vc, dt = data[name]
    kc, vc = kc.copy(), vc.copy()
    nkv, hd = case["n_kv"], case["hd"]
    for pos in case["positions"][:-1]:   # the rows the earlier steps appended: the GPU's own rounding of them
        kc[pos] = _read(d, name, "fused", "k", pos, dt).reshape(-1, nkv, hd)[pos]
        vc[pos] = _read(d, name, "fused", "v", pos, dt).reshape(-1, nkv, hd)[pos]
    last = case["positions"][-1]
    want = reference(case, x, wq, wk, kc, vc, last)
    got = _read(d, name, "fused", "y", last)[:want.size]
    tol = 3e-3 if dt == np.float16 else 2e-4   # the new row's k rounded to f16 before the scores
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert np.abs(got).max() > 1e-3


def test_fused_attention_grid(appending_run):
    """(q heads, splits) of the fused dispatch, and one dispatch fewer than the two forms' (combine when S > 1)."""
    *_, info = appending_run
    g = info["grids"]
    assert g["gated_hd256_f16"] == [16, 16, 2] and g["plain_hd128_f32"] == [8, 5, 2]
    assert g["adapter_hd128_f16"][2] == (1 if g["adapter_hd128_f16"][1] == 1 else 2)
