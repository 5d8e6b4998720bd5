"""The harness of the kernel case tests: CPython writes each case's inputs to a folder (`Case`), one Node process
runs the cases through py_engine.gpu (`CASES_NODE_CODE`, inside Pyodide) and writes the outputs back."""
import numpy as np

from node_helpers import KERNEL_HARNESS

# Runs inside Pyodide: reads in_<name>.bin, runs each case, writes out_<case>_<name>.bin.
CASES_NODE_CODE = KERNEL_HARNESS + r'''
from py_engine.gpu.kernels import Q8_INPUT, DecodeAttentionShape, MoeRoute, NormedInput, q8_input_words

async def main(args):
    d, spec, gpu, pipes = await kernel_device(args)
    step = create_buffer(gpu, 16, UNIFORM | COPY_DST, "step")
    rb = Readback(gpu)
    bufs = {}

    def buf(name, extra=0):
        if name not in bufs:
            bufs[name] = upload(gpu, (d / f"in_{name}.bin").read_bytes(), name)
        return bufs[name]

    def out(name, nbytes):
        bufs[name] = storage_buffer(gpu, nbytes, name)
        return bufs[name]

    def matrix(name, fmt, rows, cols, band_rows=None):
        return case_matrix(gpu, d, name, fmt, rows, cols, band_rows)

    results = {}
    for case in spec:
        kern = Kernels(gpu, pipes, step, lane_cap=case.get("lane_cap", 16), kv_format=case.get("kv", "f16"),
                       matvec_multi_row_groups=case.get("multi_row_groups", 4096), q8_act=case.get("q8_act", True),
                       matvec_min_groups=case.get("min_groups", 0), argmax_lanes=case.get("argmax_lanes"))
        dl = DispatchList()
        k, a = case["kernel"], case
        async with GpuErrorScope(gpu, "recording " + a["name"]):
            if k == "matvec":
                w = matrix(a["w"], a["fmt"], a["rows"], a["cols"], a.get("band_rows"))
                y = buf(a["y"]) if a.get("accumulate") else out(a["y"], a["y_len"] * 4)
                xn = out(a["xn"], a["cols"] * 4) if a.get("xn") else None
                norm = NormedInput(buf(a["nw"]), a["eps"], xn_out=xn) if a.get("nw") else None
                if a.get("two_step"):  # the unfused reference: rmsnorm into xn, then the plain product of xn
                    kern.rmsnorm(dl, buf(a["x"]), norm.weight, xn, a["cols"], norm.eps, x_base=a["x_base"])
                    kern.matvec(dl, w, xn, y, 0, a["y_base"], a.get("accumulate", False))
                elif a.get("prequant"):  # the norm also writes xn quantised; the product reads that as is
                    xq = out(a["xq"], q8_input_words(a["cols"]) * 4)
                    kern.rmsnorm(dl, buf(a["x"]), norm.weight, xn, a["cols"], norm.eps, x_base=a["x_base"], xq=xq)
                    kern.matvec(dl, w, xq, y, 0, a["y_base"], a.get("accumulate", False), prep=Q8_INPUT)
                elif a.get("xq_out"):  # the fused norm also leaves xn quantised (the router's, for the experts)
                    xq = out(a["xq"], q8_input_words(a["cols"]) * 4)
                    kern.matvec(dl, w, buf(a["x"]), y, a["x_base"], a["y_base"], a.get("accumulate", False),
                                prep=NormedInput(norm.weight, norm.eps, xn_out=xn, xq_out=xq))
                elif a.get("expect_error"):
                    try:
                        kern.matvec(dl, w, buf(a["x"]), y, a["x_base"], a["y_base"], prep=norm)
                        results[a["name"]] = "no error"
                    except ValueError as e:
                        results[a["name"]] = str(e)
                else:
                    am = out(a["am"], 8) if a.get("am") else None  # the argmax of what the product wrote
                    kern.matvec(dl, w, buf(a["x"]), y, a["x_base"], a["y_base"], a.get("accumulate", False),
                                prep=norm, argmax_out=am)
            elif k == "moe_matvec":
                pool = matrix(a["w"], a["fmt"], a["slots"] * a["rows"], a["cols"])
                y = out(a["y"], a["k"] * a["rows"] * 4)
                kern.moe_matvec(dl, pool, a["rows"], a["k"], buf(a["x"]), y,
                                MoeRoute(buf("ids"), buf("slot_map"), a["map_base"]), a["x_base"], a["x_stride"])
            elif k == "rmsnorm":
                y = out(a["y"], a["n"] * a["rows"] * 4)
                kern.rmsnorm(dl, buf(a["x"]), buf(a["w"]), y, a["n"], a["eps"], a["rows"])
            elif k == "embed":
                w = matrix(a["w"], a["fmt"], a["rows"], a["cols"], a.get("band_rows"))
                kern.embed(dl, w, out(a["y"], a["cols"] * 4))
            elif k == "qk_rope_append":
                norms = (buf(a["wq"]), buf(a["wk"])) if a["norm"] else (None, None)
                kern.qk_rope_append(dl, buf(a["x"]), out(a["q"], a["heads"] * a["hd"] * 4), *norms, buf(a["kc"]),
                                    buf(a["vc"]), DecodeAttentionShape(a["heads"], a["kv_heads"], a["hd"], 0.0,
                                                                       n_rot=a["n_rot"], eps=a["eps"],
                                                                       rope_base=a["base"], q_stride=a["hd"],
                                                                       k_base=a["k_base"], v_base=a["v_base"]))
            elif k == "attention":
                y = out(a["y"], a["n_head"] * a["hd"] * 4)
                kern.attention_max_splits = a.get("max_splits")  # None: by adapter
                kern.attention(dl, buf(a["q"]), buf(a["kc"]), buf(a["vc"]), y,
                               DecodeAttentionShape(a["n_head"], a["n_kv"], a["hd"], a["scale"]),
                               window=tuple(a["window"]) if a.get("window") else None)
                kern.attention_max_splits = None
            elif k == "silu_mul":
                kern.silu_mul(dl, buf(a["g"]), buf(a["u"]), out(a["y"], a["n"] * 4), a["n"])
            elif k == "add":
                kern.add(dl, buf(a["x"]), buf(a["y"]), a["n"])
            elif k == "moe_combine":
                kern.moe_combine(dl, buf(a["w"]), buf(a["ys"]), buf(a["h"]), a["n"], a["k"])
            elif k == "router_topk":
                ids, wts = out(a["ids"], a["k"] * 4), out(a["wts"], a["k"] * 4)
                kern.router_topk(dl, buf(a["logits"]), ids, wts, a["n_exp"], a["k"], a["renorm"])
        write_buffer(gpu, step, 0, struct.pack("<4I", a.get("token", 0), a.get("pos", 0), a.get("pos", 0) + 1, 0))
        dl.submit(gpu)
        for name in a["outputs"]:
            b = bufs[name]
            data = await rb.read(b, 0, int(b.size))
            (d / f"out_{a['name']}_{name}.bin").write_bytes(data)
        check_errors(gpu, a["name"])
    return {"adapter": gpu.info, "subgroups": gpu.has_subgroups, "results": results,
            "adapter_features": sorted(str(f) for f in gpu.adapter.features), "device_features": sorted(gpu.features)}
'''


class Case:
    """Collects inputs (written as files) and the case list for the node run."""

    def __init__(self, folder):
        self.dir = folder
        self.spec = []

    def arr(self, name, a):
        (self.dir / f"in_{name}.bin").write_bytes(np.ascontiguousarray(a).tobytes())
        return name

    def q8(self, name, rows, cols, rng):
        codes = rng.integers(-127, 128, size=(rows, cols), dtype=np.int8)
        scales = (rng.random((rows, cols // 32)) * 0.02 + 0.001).astype(np.float16)
        self.arr(name + "_codes", codes)
        self.arr(name + "_scales", scales)
        blocks = codes.reshape(rows, cols // 32, 32).astype(np.float32) * scales[:, :, None].astype(np.float32)
        return blocks.reshape(rows, cols)

    def add(self, **case):
        self.spec.append(case)

    def out(self, name, key, dtype=np.float32):
        return np.frombuffer((self.dir / f"out_{name}_{key}.bin").read_bytes(), dtype=dtype)


def close(a, b, rtol=1e-4, atol=1e-4):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=rtol, atol=atol)
