"""The qwen35moe kernels (Gated DeltaNet conv + recurrence / gated norm, gated attention q split and output gate,
shared-expert gate; the gated norm and the output gate fused into the following product; the attention's q/k
norm + RoPE + KV append in one dispatch) on a real WebGPU device (Dawn on lavapipe in Node, through Pyodide) against the numpy reference
(diskformer.reference.layers, the oracle of the model tests).

CPython writes the inputs to a temporary folder and a list of runs; one Node process records each run's
dispatches with py_engine.gpu.qwen35_kernels, submits them at the run's position and writes the buffers asked for
back; numpy checks them here. Recurrent kernels are run over several tokens, then again from position 0 (which must
start a fresh sequence whatever state the buffers hold).
"""
import json
import math

import numpy as np
import pytest

from diskformer.node_engine import run_in_node
from node_helpers import KERNEL_HARNESS
from diskformer.reference import layers


NODE_CODE = KERNEL_HARNESS + r'''
from py_engine.gpu import kernels as kernel_module, qwen35_kernels

async def main(args):
    d, spec, gpu, pipes = await kernel_device(args)
    step = create_buffer(gpu, 16, UNIFORM | COPY_DST, "step")
    kern = Kernels(gpu, pipes, step)
    rb = Readback(gpu)
    bufs = {}
    for name, nbytes in spec["buffers"].items():
        path = d / f"in_{name}.bin"
        bufs[name] = upload(gpu, path.read_bytes(), name) if path.exists() else storage_buffer(gpu, nbytes, name)
    def matrix(m):
        parts = {3: bufs[m["name"] + "_codes"], 4: bufs[m["name"] + "_scales"]} if m["fmt"] == "q8" else \
            {3: bufs[m["name"]]}
        return GpuMatrix(m["name"], m["fmt"], m["rows"], m["cols"], [(0, m["rows"], parts)])

    for i, run in enumerate(spec["runs"]):
        dl = DispatchList()
        async with GpuErrorScope(gpu, f"recording run {i}"):
            for op in run["ops"]:
                if op["op"].startswith("kern."):  # a shared launcher (py_engine.gpu.kernels.Kernels)
                    launcher = getattr(kern, op["op"][5:])
                else:
                    launcher = lambda dl, **kw: getattr(qwen35_kernels, op["op"])(kern, dl, **kw)
                args = {k: bufs[v] for k, v in op["bufs"].items()}
                args.update({k: matrix(m) for k, m in op.get("mats", {}).items()})
                for k, o in op.get("objs", {}).items():  # a launcher's shape or weights object, by class name
                    cls = getattr(qwen35_kernels, o["type"], None) or getattr(kernel_module, o["type"])
                    args[k] = cls(**o.get("vals", {}), **{f: bufs[b] for f, b in o.get("bufs", {}).items()})
                launcher(dl, **args, **op.get("vals", {}))
        write_buffer(gpu, step, 0, struct.pack("<4I", 0, run["pos"], run["pos"] + 1, 0))
        dl.submit(gpu)
        for name in run["read"]:
            data = await rb.read(bufs[name], 0, int(bufs[name].size))
            (d / f"out_{i}_{name}.bin").write_bytes(data)
        check_errors(gpu, f"run {i}")
    return {"runs": len(spec["runs"]), "subgroups": [gpu.subgroup_min, gpu.subgroup_max]}
'''


class Plan:
    """Input files, zero-filled buffers, and the runs for the Node process."""

    def __init__(self, folder):
        self.dir = folder
        self.buffers = {}
        self.runs = []

    def data(self, name, a):
        a = np.ascontiguousarray(a, dtype=np.float32)
        (self.dir / f"in_{name}.bin").write_bytes(a.tobytes())
        self.buffers[name] = a.nbytes
        return name

    def raw(self, name, a):
        """Bytes as they are (Q8_0 codes, f16 scales)."""
        a = np.ascontiguousarray(a)
        (self.dir / f"in_{name}.bin").write_bytes(a.tobytes())
        self.buffers[name] = a.nbytes
        return name

    def matrix(self, rng, name, fmt, rows, cols):
        """Random Q8_0 planes or F32 weights; returns (the op's matrix spec, the dequantised values)."""
        if fmt == "f32":
            w = (rng.standard_normal((rows, cols)) * 0.1).astype(np.float32)
            self.data(name, w)
            dense = w.astype(np.float64)
        else:
            codes = rng.integers(-127, 128, size=(rows, cols), dtype=np.int8)
            scales = (rng.random((rows, cols // 32)) * 0.004 + 0.001).astype(np.float16)
            self.raw(name + "_codes", codes)
            self.raw(name + "_scales", scales)
            dense = (codes.reshape(rows, -1, 32) * scales[:, :, None].astype(np.float64)).reshape(rows, cols)
        return {"name": name, "fmt": fmt, "rows": rows, "cols": cols}, dense

    def zeros(self, name, n):
        self.buffers[name] = 4 * n
        return name

    def run(self, pos, ops, read):
        self.runs.append({"pos": pos, "ops": ops, "read": read})
        return len(self.runs) - 1

    def write(self):
        (self.dir / "spec.json").write_text(json.dumps({"buffers": self.buffers, "runs": self.runs}))

    def out(self, run, name):
        return np.frombuffer((self.dir / f"out_{run}_{name}.bin").read_bytes(), dtype=np.float32)


EPS = 1e-6
# (n_k_heads, n_v_heads, dk, dv): one key head; tiled key heads with dv spanning two workgroups; real head sizes
GDN_SHAPES = [(1, 1, 32, 32), (2, 4, 32, 80), (2, 4, 128, 128)]
GDN_TOKENS = 5  # more than the conv's K = 4 taps: the ring wraps
CONV_K = 4


def reference_gdn_step(x, gates, window, conv_w, dt, a, state, nk, dk, dv):
    """One token of the conv + delta rule in float64 (the numpy reference's layers): (o as n_v × dv, the conv's
    window after it); `state` (n_v × dv × dk) is updated in place."""
    f = lambda v: v.astype(np.float64)  # noqa: E731
    nv = len(gates) // 2
    conv, window = layers.causal_conv1d(f(x)[None], window, f(conv_w))
    qkv = layers.silu(conv[0])
    q = qkv[:nk * dk].reshape(nk, dk)
    k = qkv[nk * dk:2 * nk * dk].reshape(nk, dk)
    v = qkv[2 * nk * dk:].reshape(nv, dv)
    key_head = np.arange(nv) % nk  # llama.cpp repeats the key heads tiled
    qn = layers.l2_norm(q, EPS)[key_head] / math.sqrt(dk)
    kn = layers.l2_norm(k, EPS)[key_head]
    beta = layers.sigmoid(f(gates[:nv]))
    g = layers.softplus(f(gates[nv:]) + f(dt)) * f(a)
    o = layers.gated_delta_rule(qn[None], kn[None], v[None], g[None], beta[None], state)
    return o[0].reshape(nv, dv), window


def gdn_case(plan, rng, expect, shape_index):
    """GDN_TOKENS tokens through the conv + delta rule at positions 0.., then a new sequence at position 0 on the
    dirty ring and state."""
    nk, nv, dk, dv = GDN_SHAPES[shape_index]
    C, K = 2 * nk * dk + nv * dv, CONV_K
    tag = f"gdn{shape_index}"
    xb = 2 * nv + 4  # the conv's input after the gates and 4 unrelated values
    dt = rng.standard_normal(nv).astype(np.float32)
    a = -np.exp(rng.standard_normal(nv)).astype(np.float32)
    conv_w = (rng.standard_normal((C, K)) * 0.5).astype(np.float32)
    plan.data(tag + "_dt", dt)
    plan.data(tag + "_a", a)
    plan.data(tag + "_conv_w", conv_w)
    plan.zeros(tag + "_window", K * C)
    plan.zeros(tag + "_state", nv * dk * dv)
    plan.zeros(tag + "_out", nv * dv)
    inputs = {}  # position -> conv input of the current sequence
    for t in range(GDN_TOKENS + 1):
        pos = t if t < GDN_TOKENS else 0
        if pos == 0:
            state = np.zeros((nv, dv, dk))
            window = np.zeros((K - 1, C))
            inputs = {}
        x = (rng.standard_normal(C) * 2).astype(np.float32)
        gates = (rng.standard_normal(2 * nv) * 2).astype(np.float32)
        inputs[pos] = x
        plan.data(f"{tag}_dn{t}", np.concatenate([gates, np.zeros(4), x]))
        op = {"op": "gdn_conv_recurrent",
              "bufs": {"dn": f"{tag}_dn{t}", "window": tag + "_window", "state": tag + "_state", "out": tag + "_out"},
              "objs": {"weights": {"type": "GdnWeights", "bufs": {"conv": tag + "_conv_w", "dt_bias": tag + "_dt",
                                                                  "a": tag + "_a"}},
                       "shape": {"type": "GdnShape", "vals": {"n_k_heads": nk, "n_v_heads": nv, "dk": dk, "dv": dv,
                                                              "eps": EPS, "kernel_size": K, "x_base": xb}}}}
        run = plan.run(pos, [op], [tag + "_out", tag + "_state", tag + "_window"])
        o, window = reference_gdn_step(x, gates, window, conv_w, dt, a, state, nk, dk, dv)
        # the GPU keeps S key-major ([head][key i][value j]) and the conv's inputs in a ring (position q in slot q % K)
        ring = {q_pos % K: inputs[q_pos] for q_pos in range(max(0, pos - K + 1), pos + 1)}
        expect[(tag, run)] = (o.ravel(), state.transpose(0, 2, 1).ravel().copy(), ring)


def norm_and_gate_cases(plan, rng, expect):
    nv, dv, zb = 4, 80, 12
    o = rng.standard_normal(nv * dv).astype(np.float32) * 3
    w = (1 + 0.1 * rng.standard_normal(dv)).astype(np.float32)
    z = rng.standard_normal(zb + nv * dv).astype(np.float32) * 2
    plan.data("gn_o", o), plan.data("gn_w", w), plan.data("gn_z", z), plan.zeros("gn_y", nv * dv)
    shape = {"type": "GdnShape", "vals": {"n_k_heads": nv, "n_v_heads": nv, "dk": dv, "dv": dv, "eps": EPS,
                                          "kernel_size": 4, "z_base": zb}}
    run = plan.run(3, [{"op": "gdn_gated_norm", "bufs": {"o": "gn_o", "norm_w": "gn_w", "z": "gn_z", "y": "gn_y"},
                        "objs": {"shape": shape}}], ["gn_y"])
    ref = layers.rms_norm(o.reshape(nv, dv).astype(np.float64), w, EPS) * layers.silu(z[zb:].reshape(nv, dv))
    expect[("gated_norm", run)] = ref.ravel()

    n_head, hd = 3, 96
    qg = rng.standard_normal(n_head * 2 * hd).astype(np.float32) * 2
    attn = rng.standard_normal(n_head * hd).astype(np.float32)
    plan.data("qg", qg), plan.data("attn", attn), plan.zeros("q_split", n_head * hd)
    run = plan.run(1, [
        {"op": "attn_q_split", "bufs": {"qg": "qg", "q": "q_split"}, "vals": {"n_head": n_head, "hd": hd}},
        {"op": "attn_output_gate", "bufs": {"qg": "qg", "attn": "attn"}, "vals": {"n_head": n_head, "hd": hd}},
    ], ["q_split", "attn"])
    heads = qg.reshape(n_head, 2 * hd).astype(np.float64)
    expect[("q_split", run)] = heads[:, :hd].ravel()
    expect[("out_gate", run)] = (attn.reshape(n_head, hd) * layers.sigmoid(heads[:, hd:])).ravel()

    n = 300
    x, wg, y, h = (rng.standard_normal(n).astype(np.float32) for _ in range(4))
    wg *= 0.1
    plan.data("sh_x", x), plan.data("sh_w", wg), plan.data("sh_y", y), plan.data("sh_h", h)
    run = plan.run(0, [{"op": "shared_expert_gate", "bufs": {"x": "sh_x", "gate_w": "sh_w", "y": "sh_y", "h": "sh_h"},
                        "vals": {"n": n}}], ["sh_h"])
    expect[("shexp", run)] = h + layers.sigmoid(float(np.dot(wg.astype(np.float64), x))) * y.astype(np.float64)


def operand(x, fmt):
    """What a product with weights of `fmt` multiplies (Q8_0: the input quantised as llama.cpp does)."""
    return layers.fake_quantize_q8_0(x.astype(np.float32)).astype(np.float64) if fmt == "q8" else x


# (weights, rows, value heads, head size): Q8_0 staging; F32 staged in workgroup memory; F32 wider than that
# staging (the unfused fallback: gdn_gated_norm / attn_output_gate, then the product)
FUSED_PRODUCTS = [("q8", 40, 4, 64), ("f32", 24, 2, 96), ("f32", 8, 13, 160)]


def fused_product_cases(plan, rng, expect):
    """The gated norm (DeltaNet) and the sigmoid output gate (attention) fused into the product that follows."""
    for n, (fmt, rows, nh, hd) in enumerate(FUSED_PRODUCTS):
        tag = f"fp{n}"
        mat, W = plan.matrix(rng, tag + "_w", fmt, rows, nh * hd)
        o = rng.standard_normal(nh * hd).astype(np.float32) * 3
        w = (1 + 0.1 * rng.standard_normal(hd)).astype(np.float32)
        zb = 12
        z = rng.standard_normal(zb + nh * hd).astype(np.float32) * 2
        y0 = rng.standard_normal(rows).astype(np.float32)
        qg = rng.standard_normal(nh * 2 * hd).astype(np.float32) * 2
        for name, a in (("o", o), ("nw", w), ("z", z), ("y", y0), ("y2", y0), ("qg", qg), ("attn", o)):
            plan.data(f"{tag}_{name}", a)
        plan.zeros(tag + "_scratch", nh * hd)
        run = plan.run(2, [
            {"op": "gated_norm_product", "mats": {"w": mat},
             "bufs": {"o": tag + "_o", "norm_w": tag + "_nw", "z": tag + "_z", "scratch": tag + "_scratch",
                      "y": tag + "_y"},
             "objs": {"shape": {"type": "GdnShape", "vals": {"n_k_heads": nh, "n_v_heads": nh, "dk": hd, "dv": hd,
                                                             "eps": EPS, "kernel_size": 4, "z_base": zb}}},
             "vals": {"label": f"linear_attn_out-{n}"}},
            {"op": "gated_output_product", "mats": {"w": mat},
             "bufs": {"attn": tag + "_attn", "qg": tag + "_qg", "y": tag + "_y2"},
             "vals": {"n_head": nh, "hd": hd, "label": f"attn_output-{n}"}},
        ], [tag + "_y", tag + "_y2"])
        f = lambda a: a.astype(np.float64)  # noqa: E731
        normed = layers.rms_norm(f(o).reshape(nh, hd), w, EPS) * layers.silu(f(z[zb:]).reshape(nh, hd))
        gated = f(o).reshape(nh, hd) * layers.sigmoid(f(qg).reshape(nh, 2 * hd)[:, hd:])
        expect[("fused_product", run)] = (tag, fmt, f(y0) + W @ operand(normed.ravel(), fmt),
                                          f(y0) + W @ operand(gated.ravel(), fmt))


# (weights, rows, key heads, value heads, key dim, value dim): the recurrence leaving o · norm_w · silu(z) and its
# sums of o², the output product finishing the norm in its staging (x_norm_pregated.wgsl), Q8_0 and F32 staging
PREGATED = [("q8", 40, 2, 4, 32, 64), ("f32", 24, 1, 2, 128, 128)]


def pregated_case(plan, rng, expect, index):
    """Tokens through gdn_conv_recurrent(sq_parts=...) then pregated_norm_product, against the unfused arithmetic:
    conv, delta rule, RMSNorm per head · norm_w · silu(z), the product."""
    fmt, rows, nk, nv, dk, dv = PREGATED[index]
    C, K = 2 * nk * dk + nv * dv, CONV_K
    tag = f"pg{index}"
    xb = 2 * nv + 4
    zb = xb + C
    mat, W = plan.matrix(rng, tag + "_w", fmt, rows, nv * dv)
    dt = rng.standard_normal(nv).astype(np.float32)
    a = -np.exp(rng.standard_normal(nv)).astype(np.float32)
    conv_w = (rng.standard_normal((C, K)) * 0.5).astype(np.float32)
    norm_w = (1 + 0.1 * rng.standard_normal(dv)).astype(np.float32)
    for name, arr in (("dt", dt), ("a", a), ("conv_w", conv_w), ("nw", norm_w)):
        plan.data(f"{tag}_{name}", arr)
    plan.zeros(tag + "_window", K * C)
    plan.zeros(tag + "_state", nv * dk * dv)
    plan.zeros(tag + "_out", nv * dv)
    plan.zeros(tag + "_sq", nv * (dv // 8))
    f = lambda x: x.astype(np.float64)  # noqa: E731
    state = np.zeros((nv, dv, dk))
    window = np.zeros((K - 1, C))
    for t in range(3):
        x = (rng.standard_normal(C) * 2).astype(np.float32)
        gates = (rng.standard_normal(2 * nv) * 2).astype(np.float32)
        z = (rng.standard_normal(nv * dv) * 2).astype(np.float32)
        y0 = rng.standard_normal(rows).astype(np.float32)
        plan.data(f"{tag}_dn{t}", np.concatenate([gates, np.zeros(4), x, z]))
        plan.data(f"{tag}_y{t}", y0)
        run = plan.run(t, [
            {"op": "gdn_conv_recurrent",
             "bufs": {"dn": f"{tag}_dn{t}", "window": tag + "_window", "state": tag + "_state",
                      "out": tag + "_out", "sq_parts": tag + "_sq"},
             "objs": {"weights": {"type": "GdnWeights", "bufs": {"conv": tag + "_conv_w", "dt_bias": tag + "_dt",
                                                                 "a": tag + "_a", "norm": tag + "_nw"}},
                      "shape": {"type": "GdnShape", "vals": {"n_k_heads": nk, "n_v_heads": nv, "dk": dk, "dv": dv,
                                                             "eps": EPS, "kernel_size": K, "x_base": xb,
                                                             "z_base": zb}}}},
            {"op": "pregated_norm_product", "mats": {"w": mat},
             "bufs": {"o_pre": tag + "_out", "sq_parts": tag + "_sq", "y": f"{tag}_y{t}"},
             "vals": {"dv": dv, "eps": EPS, "label": f"linear_attn_out-{index}"}},
        ], [tag + "_out", f"{tag}_y{t}"])
        o, window = reference_gdn_step(x, gates, window, conv_w, dt, a, state, nk, dk, dv)
        gate = f(norm_w) * layers.silu(f(z).reshape(nv, dv))
        normed = layers.rms_norm(o, norm_w, EPS) * layers.silu(f(z).reshape(nv, dv))
        expect[("pregated", run)] = (tag, fmt, t, (o * gate).ravel(), f(y0) + W @ operand(normed.ravel(), fmt))


def rope_append_case(plan, rng, expect):
    """qk_rope_append on qwen35moe's layout: q heads read from the query half of each [query | gate] head, k and v
    after them; the f16 caches get row `pos` only."""
    nh, nkv, hd, n_rot, pos = 4, 2, 64, 48, 5
    k_base = 2 * nh * hd
    v_base = k_base + nkv * hd
    x = rng.standard_normal(v_base + nkv * hd).astype(np.float32) * 2
    qn, kn = ((1 + 0.1 * rng.standard_normal(hd)).astype(np.float32) for _ in range(2))
    plan.data("ra_x", x), plan.data("ra_qn", qn), plan.data("ra_kn", kn)
    plan.zeros("ra_q", nh * hd)
    plan.zeros("ra_k", 8 * nkv * hd // 2)  # 8 rows of f16 pairs
    plan.zeros("ra_v", 8 * nkv * hd // 2)
    run = plan.run(pos, [
        {"op": "kern.qk_rope_append",
         "bufs": {"x": "ra_x", "q": "ra_q", "q_norm": "ra_qn", "k_norm": "ra_kn", "k_cache": "ra_k", "v_cache": "ra_v"},
         "objs": {"shape": {"type": "DecodeAttentionShape",
                            "vals": {"n_head": nh, "n_head_kv": nkv, "head_dim": hd, "scale": hd ** -0.5,
                                     "n_rot": n_rot, "eps": EPS, "rope_base": 10000.0, "q_stride": 2 * hd,
                                     "k_base": k_base, "v_base": v_base}}}},
    ], ["ra_q", "ra_k", "ra_v"])
    f = lambda a: a.astype(np.float64)  # noqa: E731
    q = layers.rms_norm(f(x[:k_base]).reshape(nh, 2 * hd)[:, :hd], qn, EPS)
    k = layers.rms_norm(f(x[k_base:v_base]).reshape(nkv, hd), kn, EPS)
    rope = lambda h: layers.rope_neox(h[None], np.array([pos]), n_rot, 10000.0)[0]  # noqa: E731
    expect[("rope_append", run)] = (pos, rope(q).ravel(), rope(k).ravel(), x[v_base:])


@pytest.fixture(scope="module")
def kernel_results(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qwen35_kernels")
    rng = np.random.default_rng(35)
    plan = Plan(folder)
    expect = {}
    for i in range(len(GDN_SHAPES)):
        gdn_case(plan, rng, expect, i)
    norm_and_gate_cases(plan, rng, expect)
    fused_product_cases(plan, rng, expect)
    for i in range(len(PREGATED)):
        pregated_case(plan, rng, expect, i)
    rope_append_case(plan, rng, expect)
    plan.write()
    info = run_in_node(NODE_CODE, {"dir": str(folder)}, mounts=[folder], timeout=300)
    assert info["runs"] == len(plan.runs)
    return plan, expect


def _items(expect, kind):
    return [(run, v) for (k, run), v in expect.items() if k == kind]


@pytest.mark.parametrize("shape_index", range(len(GDN_SHAPES)))
def test_gdn_conv_recurrent(kernel_results, shape_index):
    plan, expect = kernel_results
    tag = f"gdn{shape_index}"
    runs = _items(expect, tag)
    assert len(runs) == GDN_TOKENS + 1
    for run, (o, state, ring) in runs:
        np.testing.assert_allclose(plan.out(run, tag + "_out"), o, rtol=2e-4, atol=2e-5, err_msg=f"o, run {run}")
        np.testing.assert_allclose(plan.out(run, tag + "_state"), state, rtol=2e-4, atol=2e-5,
                                   err_msg=f"state, run {run}")
        window = plan.out(run, tag + "_window").reshape(CONV_K, -1)
        for slot, x in ring.items():  # every input the next K - 1 positions read, kept as given
            np.testing.assert_array_equal(window[slot], x, err_msg=f"ring slot {slot}, run {run}")


def test_gdn_gated_norm(kernel_results):
    plan, expect = kernel_results
    [(run, ref)] = _items(expect, "gated_norm")
    np.testing.assert_allclose(plan.out(run, "gn_y"), ref, rtol=1e-5, atol=1e-5)


def test_gated_attention_split_and_gate(kernel_results):
    plan, expect = kernel_results
    [(run, q)] = _items(expect, "q_split")
    np.testing.assert_array_equal(plan.out(run, "q_split"), q.astype(np.float32))
    [(run, gated)] = _items(expect, "out_gate")
    np.testing.assert_allclose(plan.out(run, "attn"), gated, rtol=1e-5, atol=1e-6)


def test_shared_expert_gate(kernel_results):
    plan, expect = kernel_results
    [(run, ref)] = _items(expect, "shexp")
    np.testing.assert_allclose(plan.out(run, "sh_h"), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("index", range(len(PREGATED)), ids=lambda i: "_".join(map(str, PREGATED[i])))
def test_gated_norm_split_between_recurrence_and_product(kernel_results, index):
    plan, expect = kernel_results
    runs = [(run, v) for run, v in _items(expect, "pregated") if v[0] == f"pg{index}"]
    assert len(runs) == 3
    for run, (tag, fmt, t, o_pre, want) in runs:
        np.testing.assert_allclose(plan.out(run, tag + "_out"), o_pre, rtol=2e-4, atol=2e-5, err_msg=f"o, token {t}")
        tol = {"rtol": 1e-4, "atol": 1e-4} if fmt == "f32" else {"rtol": 0, "atol": 2e-3 * np.abs(want).max()}
        np.testing.assert_allclose(plan.out(run, f"{tag}_y{t}"), want, **tol, err_msg=f"product, token {t}")


@pytest.mark.parametrize("index", range(len(FUSED_PRODUCTS)), ids=lambda i: "_".join(map(str, FUSED_PRODUCTS[i])))
def test_gate_fused_into_the_following_product(kernel_results, index):
    plan, expect = kernel_results
    runs = {v[0]: (run, v) for run, v in _items(expect, "fused_product")}
    run, (tag, fmt, want_norm, want_gate) = runs[f"fp{index}"]
    # a Q8_0 product quantises an input the GPU computed in f32: a code can round the other way
    tol = {"rtol": 1e-4, "atol": 1e-4} if fmt == "f32" else {"rtol": 0, "atol": 2e-3 * np.abs(want_norm).max()}
    np.testing.assert_allclose(plan.out(run, tag + "_y"), want_norm, **tol, err_msg="gated norm")
    np.testing.assert_allclose(plan.out(run, tag + "_y2"), want_gate, **tol, err_msg="sigmoid gate")


def test_q_k_rope_and_kv_append_in_one_dispatch(kernel_results):
    plan, expect = kernel_results
    [(run, (pos, want_q, want_k, v))] = _items(expect, "rope_append")
    np.testing.assert_allclose(plan.out(run, "ra_q"), want_q, rtol=1e-5, atol=1e-5)
    rows = {c: plan.out(run, f"ra_{c}").view(np.float16).reshape(8, -1) for c in ("k", "v")}
    np.testing.assert_allclose(rows["k"][pos].astype(np.float64), want_k, rtol=2e-3, atol=2e-3)
    np.testing.assert_array_equal(rows["v"][pos], v.astype(np.float16))
    for c, r in rows.items():
        assert not np.delete(r, pos, axis=0).any(), f"{c}: only row {pos} is written"
