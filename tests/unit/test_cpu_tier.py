"""The CPU expert tier (web/cpu_tier: the WebAssembly kernel and its worker pool) against the numpy reference.

Expert records come from a real store (the fixture GGUFs ingested by py_engine.store); the pool runs in Node.
F32 records: within 1e-4 of the reference FFN (relative to the output's scale). Q8_0 records: tightly equal to a numpy
model of the same math (inputs of the Q8_0 products quantised as ggml's quantize_row_q8_0, as the GPU kernels do),
and within the fixtures' Q8_0 tolerance of the plain f32 FFN.
"""
import json
import shutil
import subprocess

import numpy as np
import pytest

from cpu_tier_cases import ROOT, ExpertMath, expected, inputs, models, node_ok, record, rel_err, store_of  # noqa: F401
from diskformer.node_engine import node_executable
from diskformer.reference.layers import gelu_tanh

RUNNER = ROOT / "tests" / "cpu_tier_runner.mjs"
BUILD = ROOT / "scripts" / "build_cpu_tier.mjs"
LAYER = 1


def run_pool(tmp, layout, records, requests, workers, tokens, activation="swiglu"):
    """Run the requests ({slots, tokens, weights, x, mode}) in one pool; returns [(out, y)] per request."""
    xs, at = [], 0
    spec = []
    for r in requests:
        spec.append({"slots": r["slots"], "tokens": r["tokens"], "weights": r["weights"], "x_at": at,
                     "mode": r.get("mode", "sync")})
        xs.append(np.asarray(r["x"], np.float32))
        at += len(r["x"])
    (tmp / "request.json").write_text(json.dumps({
        "layout": layout, "workers": workers, "slots": len(records), "tokens": tokens, "activation": activation,
        "jobs": max(len(r["slots"]) for r in requests), "requests": spec}))
    (tmp / "records.bin").write_bytes(b"".join(records))
    np.concatenate(xs).astype("<f4").tofile(tmp / "x.f32")
    proc = subprocess.run([node_executable(), str(RUNNER), str(tmp)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    n = layout["dims"]["gate"][0]
    return [(np.fromfile(tmp / f"out.{i}.f32", "<f4").reshape(-1, n),
             np.fromfile(tmp / f"y.{i}.f32", "<f4").reshape(-1, n)) for i in range(len(requests))]


def requests_for(layout, rng, n_slots):
    """A one-token request of every slot, then two tokens sharing slots (a prefill chunk), the second async."""
    n_embd = layout["dims"]["gate"][0]
    k = min(4, n_slots)
    return [
        {"slots": list(range(k)), "tokens": [0] * k, "weights": list(rng.dirichlet(np.ones(k))),
         "x": inputs(rng, 1, n_embd)},
        {"slots": [0, 2, 1, 2, 3, 0][:2 * k - 2], "tokens": [0, 0, 0, 1, 1, 1][:2 * k - 2],
         "weights": list(rng.uniform(0.05, 0.5, 2 * k - 2)), "x": inputs(rng, 2, n_embd), "mode": "async"},
    ]


@pytest.mark.parametrize("stem", ["micro-qwen35moe-f32", "micro-qwen3moe-f32"])
@pytest.mark.parametrize("workers", [1, 3])
def test_f32_records_match_the_reference(stem, workers, models, tmp_path, node_ok):
    gguf = models / f"{stem}.gguf"
    layout, experts_bin = store_of(gguf)
    assert layout["types"] == {"gate": 0, "up": 0, "down": 0}
    experts = [0, 3, 5, 7]
    records = [record(layout, experts_bin, LAYER, e) for e in experts]
    rng = np.random.default_rng(11)
    reqs = requests_for(layout, rng, len(records))
    math = ExpertMath(gguf, LAYER)
    for (out, ys), req in zip(run_pool(tmp_path, layout, records, reqs, workers, 2), reqs):
        want_y, want_out = expected(math.plain, experts, req)
        assert rel_err(ys, want_y) < 1e-4
        assert rel_err(out, want_out) < 1e-4


@pytest.mark.parametrize("stem", ["micro-qwen35moe", "tiny-qwen3moe"])
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_q8_records_match_the_quantised_math(stem, workers, models, tmp_path, node_ok):
    gguf = models / f"{stem}.gguf"
    layout, experts_bin = store_of(gguf)
    assert layout["types"] == {"gate": 8, "up": 8, "down": 8}
    experts = [1, 2, 4, 6]
    records = [record(layout, experts_bin, LAYER, e) for e in experts]
    rng = np.random.default_rng(5)
    reqs = requests_for(layout, rng, len(records))
    math = ExpertMath(gguf, LAYER)
    for (out, ys), req in zip(run_pool(tmp_path, layout, records, reqs, workers, 2), reqs):
        want_y, want_out = expected(math.act_q8, experts, req)
        assert rel_err(ys, want_y) < 1e-5
        assert rel_err(out, want_out) < 1e-5
        # quantising both products' inputs moves the result by about a percent at most from the f32 FFN
        plain_y, _ = expected(math.plain, experts, req)
        assert rel_err(ys, plain_y) < 3e-2


@pytest.mark.parametrize("workers", [1, 3])
def test_gemma4_records_match_the_reference(workers, gemma4_models, tmp_path, node_ok):
    """gemma4's experts: fused gate|up halves, GEGLU (tanh-form GELU in f32), Q4_0 blocks split into nibble and
    scale planes; the F32 twin holds the same values as F32."""
    for stem, types in (("micro-gemma4-f32", {"gate": 0, "up": 0, "down": 0}),
                        ("micro-gemma4", {"gate": 2, "up": 2, "down": 2})):
        gguf = gemma4_models / f"{stem}.gguf"
        layout, experts_bin = store_of(gguf)
        assert layout["types"] == types
        experts = [0, 3, 5, 7]
        records = [record(layout, experts_bin, LAYER, e) for e in experts]
        rng = np.random.default_rng(17)
        reqs = requests_for(layout, rng, len(records))
        math = ExpertMath(gguf, LAYER)
        work = tmp_path / stem
        work.mkdir()
        for (out, ys), req in zip(run_pool(work, layout, records, reqs, workers, 2, "geglu"), reqs):
            plain_y, plain_out = expected(math.plain, experts, req)
            if types["gate"] == 0:
                assert rel_err(ys, plain_y) < 1e-4 and rel_err(out, plain_out) < 1e-4
                continue
            want_y, want_out = expected(math.act_q8, experts, req)
            assert rel_err(ys, want_y) < 1e-5
            assert rel_err(out, want_out) < 1e-5
            assert rel_err(ys, plain_y) < 3e-2


def test_the_geglu_kernel_is_exact_in_f32():
    """The kernel's GELU over a sweep of gate values: the f32 steps of shaders/common/gelu_mul.wgsl with a
    correctly rounded f32 tanh, and within an f32 rounding of float64's GELU (the tails clamp to 0 and x)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    proc = subprocess.run([node, "--input-type=module", "-e", GEGLU_SWEEP], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    g = np.linspace(-12, 12, 4801, dtype=np.float32)
    got = np.array(json.loads(proc.stdout), np.float32)
    f32 = np.float32
    z = np.clip(f32(0.7978845608028654) * g * (f32(1) + f32(0.044715) * g * g), f32(-15), f32(15))
    tanh = np.tanh(z.astype(np.float64)).astype(np.float32)
    steps = f32(0.5) * g * (f32(1) + tanh)
    assert np.array_equal(got, steps)
    # 1 + tanh(z) cancels for negative g, as on the GPU: an absolute bound, two f32 ulps of the larger of |g| and 1
    # (measured 1.16)
    bound = 2 * np.spacing(np.maximum(np.abs(g), f32(1))).astype(np.float64)
    assert np.all(np.abs(got - gelu_tanh(g.astype(np.float64))) <= bound)


GEGLU_SWEEP = r"""
import { readFileSync } from 'node:fs';
const bytes = readFileSync(new URL('./web/cpu_tier/expert_ffn.wasm', 'file://' + process.cwd() + '/'));
const memory = new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
const { instance } = await WebAssembly.instantiate(bytes, { env: { memory, exp: Math.exp } });
const n = 4801;
const f = new Float32Array(memory.buffer);
for (let i = 0; i < n; i++) { f[i] = Math.fround(-12 + (24 * i) / (n - 1)); f[n + i] = 1; }
instance.exports.geglu(0, 4 * n, 8 * n, n);
console.log(JSON.stringify(Array.from(f.subarray(2 * n, 3 * n))));
"""


def test_the_committed_kernel_is_built_from_its_source():
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    proc = subprocess.run([node, str(BUILD), "--check"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    if proc.returncode == 2:
        pytest.skip(proc.stderr.strip())
    assert proc.returncode == 0, proc.stdout + proc.stderr


PLAN_ERRORS = r"""
import { planMemory } from './web/cpu_tier/plan.js';
const real = { types: { gate: 8, up: 8, down: 8 }, dims: { gate: [2048, 512] },
               planes: { gate_codes: [0, 1048576] }, record_size: 3342336 };
const caps = { workers: 2, slots: 8, tokens: 1, jobs: 8 };
const said = (layout, c) => { try { planMemory(layout, c); return ''; } catch (e) { return e.message; } };
console.log(JSON.stringify({
  pages: planMemory(real, caps).pages,
  q4k: said({ ...real, types: { gate: 12, up: 12, down: 12 } }, caps),
  act: said(real, { ...caps, activation: 'relu' }),
  odd: said({ ...real, dims: { gate: [2048, 500] } }, caps),
  huge: said(real, { ...caps, slots: 2000 }),
}));
"""


def test_the_pool_refuses_what_it_cannot_compute_in_words():
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    proc = subprocess.run([node, "--input-type=module", "-e", PLAN_ERRORS], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    said = json.loads(proc.stdout)
    assert said["pages"] * 65536 >= 8 * 3342336
    assert "F32, Q8_0 and Q4_0" in said["q4k"] and "type 12" in said["q4k"]
    assert "swiglu and geglu" in said["act"] and "relu" in said["act"]
    assert "multiples of 32" in said["odd"]
    assert "fewer record slots" in said["huge"]


START_ERRORS = r"""
import { createExpertPool } from './web/cpu_tier/pool.js';
const layout = { types: { gate: 0, up: 0, down: 0 }, dims: { gate: [64, 32] },
                 planes: { gate_codes: [0, 8192], up_codes: [8192, 8192], gate_scales: [16384, 0],
                           up_scales: [16384, 0], down_codes: [16384, 8192], down_scales: [24576, 0] },
                 record_size: 24576 };
const said = async (f) => { try { await f(); return ''; } catch (e) { return e.message; } };
const pool = await createExpertPool({ layout, workers: 2, slots: 2 });
const out = {
  start: await said(() => createExpertPool({ layout, workers: 1, workerUrl: new URL('missing_worker.js', import.meta.url) })),
  slot: await said(() => pool.compute(new Float32Array(64), { slots: [2] })),
  rows: await said(() => pool.compute(new Float32Array(65), { slots: [0] })),
  token: await said(() => pool.compute(new Float32Array(64), { slots: [0], tokens: [1] })),
  fine: (await pool.compute(new Float32Array(64), { slots: [1, 0] })).length,
};
pool.close();
out.closed = await said(() => pool.compute(new Float32Array(64), { slots: [0] }));
console.log(JSON.stringify(out));
"""


def test_the_pool_says_what_was_wrong_with_a_request():
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    proc = subprocess.run([node, "--input-type=module", "-e", START_ERRORS], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    said = json.loads(proc.stdout)
    assert "could not start" in said["start"]
    assert "outside the pool's 2" in said["slot"]
    assert "rows of 64" in said["rows"]
    assert "token 1" in said["token"]
    assert said["fine"] == 64
    assert "closed" in said["closed"]
