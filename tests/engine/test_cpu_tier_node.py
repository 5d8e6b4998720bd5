"""py_engine.cpu_tier (the Python side of the CPU expert tier) in Pyodide under Node: the engine's calls reach the
worker pool and bring back the same numbers as numpy's model of the kernel's math."""
import json

import numpy as np
import pytest

from diskformer.node_engine import run_in_node
from cpu_tier_cases import ROOT, ExpertMath, expected, inputs, models, node_ok, record, rel_err, store_of  # noqa: F401

CODE = r'''
from pathlib import Path
import js
from py_engine.cpu_tier import CpuExpertTier

def floats(js_f32):
    return [float(v) for v in js_f32.to_py()]

async def main(args):
    d = Path(args["dir"])
    tier = await CpuExpertTier.open(args["layout"], workers=2, slots=len(args["experts"]), tokens=2,
                                    url=args["pool_url"])
    try:
        records = (d / "records.bin").read_bytes()
        for s in range(tier.slots):
            tier.record(s).assign(records[s * tier.record_size:(s + 1) * tier.record_size])
        x = (d / "x.f32").read_bytes()
        one = tier.compute(memoryview(x)[:4 * tier.n_embd], slots=[0, 1, 2], weights=[0.5, 0.3, 0.2])
        ys = [floats(tier.expert_output(j)) for j in range(3)]
        two = await tier.compute_async(memoryview(x), slots=[2, 0, 1], tokens=[0, 1, 1], weights=[1.0, 0.25, 0.75])
        try:
            tier.compute(memoryview(x)[:4 * tier.n_embd], slots=[tier.slots])
            refused = ""
        except Exception as e:
            refused = str(e)
        rate = await tier.measure(jobs=2, repeats=2)
        return {"rate": rate, "one": floats(one), "ys": ys, "two": floats(two), "refused": refused,
                "dims": [tier.n_embd, tier.n_ff]}
    finally:
        tier.close()
'''


@pytest.mark.parametrize("stem", ["micro-qwen35moe"])
def test_the_python_wrapper_computes_experts_in_pyodide(stem, models, tmp_path, node_ok):
    gguf = models / f"{stem}.gguf"
    layout, experts_bin = store_of(gguf)
    experts = [2, 5, 7]
    (tmp_path / "records.bin").write_bytes(b"".join(record(layout, experts_bin, 1, e) for e in experts))
    n_embd = layout["dims"]["gate"][0]
    x = inputs(np.random.default_rng(3), 2, n_embd)
    x.astype("<f4").tofile(tmp_path / "x.f32")
    pool_url = (ROOT / "web" / "cpu_tier" / "pool.js").as_uri()
    got = run_in_node(CODE, {"dir": str(tmp_path), "layout": layout, "experts": experts, "pool_url": pool_url},
                      mounts=[tmp_path], timeout=300)
    assert got["dims"] == [n_embd, layout["dims"]["gate"][1]]
    math = ExpertMath(gguf, 1)
    want_y, want_one = expected(math.act_q8, experts, {"slots": [0, 1, 2], "tokens": [0, 0, 0],
                                                       "weights": [0.5, 0.3, 0.2], "x": x})
    assert rel_err(np.array(got["ys"]), want_y) < 1e-5
    assert rel_err(np.array(got["one"]).reshape(1, -1), want_one) < 1e-5
    _, want_two = expected(math.act_q8, experts, {"slots": [2, 0, 1], "tokens": [0, 1, 1],
                                                  "weights": [1.0, 0.25, 0.75], "x": x})
    assert rel_err(np.array(got["two"]).reshape(2, -1), want_two) < 1e-5
    assert "outside the pool" in got["refused"]
    rate = got["rate"]
    assert rate["ms"] > 0 and rate["experts_per_s"] == pytest.approx(2000 / rate["ms"])
    assert rate["bytes_per_s"] == pytest.approx(rate["experts_per_s"] * layout["record_size"])
