// Prefill GEMM tiles on the GPU at hand: the f32 tile (Q8_0 weights dequantised to f32, f32 FMAs:
// shaders/gemm_tile_f32.wgsl) against the int8 tile (activations quantised to Q8_0 while staging, dot4I8Packed:
// gemm_tile_q8.wgsl), both through the engine's own gemm.wgsl / moe_gemm.wgsl, and the int8 moe_gemm_few.wgsl
// and the fused moe_gate_up_few.wgsl + the down reading its int8 act (includes and {{CONSTS}} filled here as
// py_engine/gpu/shader_loader.py does), on the real model's shapes.
//   DAWN_NODE=path/dawn.node node lab/gpu_probes/gemm_variants.mjs [--tiny]
// (without DAWN_NODE the `webgpu` package of node_modules). --tiny: small shapes, for a check that it runs (lavapipe).
// Prints one JSON line per (shape, tokens, tile): µs per dispatch (median of repeats, each the mean of R back-to-back
// dispatches in one pass; wall clock per submit where the device has no timestamp queries), TFLOP/s (2 · rows · K ·
// tokens; the int8 tile's multiply-adds counted alike) and the largest error of sampled outputs against a JS
// reference of the same arithmetic (int8: x quantised as llama.cpp does), relative to the largest |output|.
import { assemble, dawnDevice, f16, gpuTools, rng } from './gpu_timing.mjs';

const { adapter, device, hasTs } = await dawnDevice(['maxStorageBufferBindingSize', 'maxBufferSize',
  'maxStorageBuffersPerShaderStage']);
const tiny = process.argv.includes('--tiny');
const S = GPUBufferUsage.STORAGE, CD = GPUBufferUsage.COPY_DST, CS = GPUBufferUsage.COPY_SRC;
const U = GPUBufferUsage.UNIFORM, MR = GPUBufferUsage.MAP_READ;
const { mkbuf, time, readback } = gpuTools(device, hasTs);

const pipes = new Map();
// few: {TT, KC} for the few-picks kernels' picks per pass and blocks staged per step (moe_few_stage.wgsl) in
// place of the engine's, for a sweep
function pipeline(name, consts, few = null) {
  const key = name + JSON.stringify(consts) + JSON.stringify(few);
  if (!pipes.has(key)) {
    let code = assemble(name, consts);
    if (few) {
      const edited = code.replace(/const TT: u32 = \d+u;/, `const TT: u32 = ${few.TT}u;`)
        .replace(/const KC: u32 = \d+u;/, `const KC: u32 = ${few.KC}u;`);
      if (!/const TT: u32 = \d+u;/.test(code) || !/const KC: u32 = \d+u;/.test(code)) throw new Error(`${name}: no TT / KC`);
      code = edited;
    }
    const module = device.createShaderModule({ code });
    pipes.set(key, device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } }));
  }
  return pipes.get(key);
}

// --- data ---
const toF16 = (v) => {  // nearest f16 of a small positive v (ties to even), as ggml's scale conversion
  const f = new Float32Array([v]), b = new Uint32Array(f.buffer)[0];
  if (v < 6.103515625e-05) return Math.round(v * 16777216) / 16777216;
  const r = ((b + 0xfff + ((b >> 13) & 1)) & 0xffffe000) >>> 0;
  return new Float32Array(new Uint32Array([r]).buffer)[0];
};
const fr = Math.fround;
// llama.cpp's quantize_row_q8_0 of one 32-block: codes and d
function quant(x, o) {
  let amax = 0; for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[o + j]));
  const inv = amax > 0 ? fr(127 / amax) : 0, q = new Int8Array(32);
  for (let j = 0; j < 32; j++) { const v = fr(x[o + j] * inv); let r = Math.round(v); if (r - v === 0.5 && r % 2) r -= 1; q[j] = r; }
  return { q, d: toF16(fr(amax / 127)) };
}
// Q8_0 weights of `rows` rows: codes repeat a random pattern of at most 16 MiB (timing does not depend on values)
function weights(rows, K, seed) {
  const r = rng(seed), nb = K / 32, P = Math.min(rows * K, 16 << 20);
  const pat = new Int8Array(P); for (let i = 0; i < P; i++) pat[i] = (r() * 256 | 0) - 128;
  const codes = device.createBuffer({ size: rows * K, usage: S | CD });
  for (let o = 0; o < rows * K; o += P) device.queue.writeBuffer(codes, o, pat.buffer, 0, Math.min(P, rows * K - o));
  const sc = new Uint16Array(rows * nb + (rows * nb & 1));
  for (let i = 0; i < rows * nb; i++) sc[i] = 0x2000 + ((r() * 1024) | 0);
  return { codes, scales: mkbuf(sc), code: (row, k) => pat[(row * K + k) % P], scale: (row, b) => f16(sc[row * nb + b]) };
}
// The reference of output (row, x row): int8 (quantised x, Σ_b d_w d_x Σ q q) or f32 (dequantised W · x)
function refDot(W, row, x, xo, K, int8) {
  let s = 0;
  for (let b = 0; b < K / 32; b++) {
    let t = 0;
    if (int8) { const { q, d } = quant(x, xo + 32 * b); for (let j = 0; j < 32; j++) t += W.code(row, 32 * b + j) * q[j]; t *= d; }
    else for (let j = 0; j < 32; j++) t += W.code(row, 32 * b + j) * x[xo + 32 * b + j];
    s += t * W.scale(row, b);
  }
  return s;
}

const tokenTile = (n) => [16, 32, 64].find((tt) => n <= tt) || 64;  // chunk_kernels.gemm_token_tile
const XFMTS = ['f32', 'q8'];

async function dense(name, rows, K, T) {
  const W = weights(rows, K, rows ^ K), r = rng(7 + T);
  const x = new Float32Array(T * K); for (let i = 0; i < x.length; i++) x[i] = r() * 2 - 1;
  const xb = mkbuf(x), y = device.createBuffer({ size: T * rows * 4, usage: S | CS });
  const params = mkbuf(new Uint32Array([rows, K / 32, 0, K, 0, rows, 0, 0, K / 32, 0, 0, 0]), U | CD);  // one K slice
  const chunk = mkbuf(new Uint32Array([T, 0, 0, 0]), U | CD);
  const tt = tokenTile(T), gx = Math.ceil(rows / 128), gy = Math.ceil(T / tt);
  const R = tiny ? 2 : Math.max(3, Math.min(50, Math.round(2e10 / (2 * rows * K * T))));
  for (const xf of XFMTS) {
    const pipe = pipeline('gemm.wgsl', { WFMT: 'q8', XFMT: xf, TILE_TN: tt / 16, XIN: 'f32' });
    const bufs = [params, chunk, xb, W.codes, W.scales, y];
    const bg = device.createBindGroup({ layout: pipe.getBindGroupLayout(0),
      entries: bufs.map((buffer, binding) => ({ binding, resource: { buffer } })) });
    const us = await time(pipe, bg, gx, gy, R);
    const got = await readback(y, T * rows * 4);
    let err = 0, mag = 1e-30;
    for (const [row, t] of [[0, 0], [rows - 1, T - 1], [rows >> 1, T >> 1], [1, T - 1], [rows - 2, 0]]) {
      const want = refDot(W, row, x, t * K, K, xf === 'q8');
      err = Math.max(err, Math.abs(got[t * rows + row] - want)); mag = Math.max(mag, Math.abs(want));
    }
    report({ shape: name, rows, K, tokens: T, tile: `${xf === 'q8' ? 'int8' : 'f32'}x${tt}`, us, flops: 2 * rows * K * T, relErr: err / mag });
  }
  [W.codes, W.scales, xb, y, params, chunk].forEach((b) => b.destroy());
}

// T tokens pick k of nExp experts (distinct, uniform): the picks' experts and moe_group.wgsl's grouping of them
function routing(T, nExp, k, r) {
  const route = [];
  for (let t = 0; t < T; t++) {
    const picked = new Set(); while (picked.size < k) picked.add(r() * nExp | 0);
    route.push(...picked);
  }
  const picks = Array.from({ length: nExp }, () => []);
  route.forEach((e, p) => picks[e].push(p));
  const counts = picks.map((p) => p.length), offsets = [];
  counts.reduce((o, c) => (offsets.push(o), o + c), 0);
  return { route, grouped: new Uint32Array([...counts, ...offsets, ...picks.flat()]) };
}

// Routed experts (routing); gate/up read the token's row (x_div = k)
async function experts(name, rows, K, T, nExp, k, xdiv) {
  const W = weights(nExp * rows, K, rows ^ K ^ nExp), r = rng(11 + T);
  const { route, grouped } = routing(T, nExp, k, r);
  const xRows = xdiv === k ? T : T * k;
  const x = new Float32Array(xRows * K); for (let i = 0; i < x.length; i++) x[i] = r() * 2 - 1;
  const xb = mkbuf(x), y = device.createBuffer({ size: T * k * rows * 4, usage: S | CS });
  const slotMap = mkbuf(new Uint32Array(nExp).map((_, i) => i)), mask = mkbuf(new Uint32Array(nExp).fill(1));
  const params = mkbuf(new Uint32Array([rows, K / 32, 0, K, xdiv, 0, nExp, 0, 0xFFFFFFFF, rows * K / 16, rows * K / 32,
                                        0, 0, 0, 0, 0]), U | CD);
  const gb = mkbuf(grouped);
  const tt0 = tokenTile(Math.ceil(T * k / nExp));
  const R = tiny ? 2 : Math.max(3, Math.min(50, Math.round(2e10 / (2 * rows * K * T * k))));
  // the engine's tile (tt0) for both formats, the wider int8 tiles (fewer passes for an expert with many picks),
  // and moe_gemm_few.wgsl (int8; the engine's choice up to 16 picks per expert on average)
  const runs = [...XFMTS.map((xf) => [xf, tt0]), ...[32, 64].filter((t) => t > tt0).map((t) => ['q8', t]),
                ['q8', 'few']];
  for (const [xf, tt] of runs) {
    const pipe = tt === 'few' ? pipeline('moe_gemm_few.wgsl', { XIN: 'f32' })
      : pipeline('moe_gemm.wgsl', { WFMT: 'q8', XFMT: xf, TILE_TN: tt / 16, XIN: 'f32' });
    const gx = tt === 'few' ? Math.ceil(rows / 64) : Math.ceil(rows / 128);
    const bufs = { 0: params, 1: xb, 2: y, 3: W.codes, 4: W.scales, 5: slotMap, 6: gb, 7: mask };
    const bg = device.createBindGroup({ layout: pipe.getBindGroupLayout(0),
      entries: Object.entries(bufs).map(([binding, buffer]) => ({ binding: +binding, resource: { buffer } })) });
    const us = await time(pipe, bg, gx, nExp, R);
    const got = await readback(y, T * k * rows * 4);
    let err = 0, mag = 1e-30;
    for (const [p, row] of [[0, 0], [T * k - 1, rows - 1], [(T * k) >> 1, rows >> 1], [3 % (T * k), 1]]) {
      const want = refDot(W, route[p] * rows + row, x, Math.floor(p / xdiv) * K, K, xf === 'q8');
      err = Math.max(err, Math.abs(got[p * rows + row] - want)); mag = Math.max(mag, Math.abs(want));
    }
    report({ shape: name, rows, K, tokens: T, experts: `${k} of ${nExp}`, tile: `${xf === 'q8' ? 'int8' : 'f32'}x${tt}`, us,
             flops: 2 * rows * K * T * k, relErr: err / mag });
  }
  [W.codes, W.scales, xb, y, slotMap, mask, params, gb].forEach((b) => b.destroy());
}

// The routed FFN fused for few picks (the engine's path up to 16 picks per expert on average, where the device binds
// 9 storage buffers): moe_gate_up_few.wgsl (x quantised ahead as the chunk's norm writes it; gate and up of
// 512 × 2048 experts, SwiGLU, act written as Q8_0 codes + scales) and the down product reading that act (moe_gemm_few.wgsl, XIN = q8); compare with the 'few' lines of
// the gate/up and down shapes above (three such dispatches and a SwiGLU pass). Checked on sampled blocks / outputs
// against the JS reference of the same arithmetic.
async function fusedFfn(name, ffn, K, T, nExp, k, few = null) {
  const G = weights(nExp * ffn, K, 101), Uw = weights(nExp * ffn, K, 202), D = weights(nExp * K, ffn, 303);
  const r = rng(13 + T), { route, grouped } = routing(T, nExp, k, r);
  const gb = mkbuf(grouped);
  const x = new Float32Array(T * K); for (let i = 0; i < x.length; i++) x[i] = r() * 2 - 1;
  const nPick = T * k, nbo = ffn / 32, nb = K / 32;
  const xw = new Uint32Array(9 * T * nb), xc = new Int8Array(xw.buffer), xs = new Float32Array(xw.buffer);
  for (let i = 0; i < T * nb; i++) {  // x as the chunk's norm leaves it: the rows' codes, then their scales
    const { q, d } = quant(x, 32 * i); xc.set(q, 32 * i); xs[8 * T * nb + i] = d;
  }
  const xb = mkbuf(xw), act = device.createBuffer({ size: nPick * ffn * 4, usage: S | CS });
  const y = device.createBuffer({ size: nPick * K * 4, usage: S | CS });
  const slotMap = mkbuf(new Uint32Array(nExp).map((_, i) => i)), mask = mkbuf(new Uint32Array(nExp).fill(1));
  const yScales = 8 * nPick * nbo;
  const pGU = mkbuf(new Uint32Array([ffn, nb, 8 * T * nb, 0, k, 0, nExp, 0, 0xFFFFFFFF, ffn * K / 16, ffn * K / 32,
                                     0, 0, 0, 0, yScales]), U | CD);
  const pD = mkbuf(new Uint32Array([K, ffn / 32, yScales, ffn, 1, 0, nExp, 0, 0xFFFFFFFF, K * ffn / 16, K * ffn / 32,
                                    0, 0, 0, 0, 0]), U | CD);
  const R = tiny ? 2 : Math.max(3, Math.min(50, Math.round(2e10 / (2 * ffn * K * T * k))));
  const run = async (shader, consts, bufs, rows) => {
    const pipe = pipeline(shader, consts, few);
    const bg = device.createBindGroup({ layout: pipe.getBindGroupLayout(0),
      entries: Object.entries(bufs).map(([binding, buffer]) => ({ binding: +binding, resource: { buffer } })) });
    return time(pipe, bg, Math.ceil(rows / 64), nExp, R);
  };
  const common = { 5: slotMap, 6: gb, 7: mask };
  const usGU = await run('moe_gate_up_few.wgsl', {}, { 0: pGU, 1: xb, 2: act, 3: G.codes, 4: G.scales, 8: Uw.codes,
                                                           9: Uw.scales, ...common }, ffn);
  const usD = await run('moe_gemm_few.wgsl', { XIN: 'q8' }, { 0: pD, 1: act, 2: y, 3: D.codes, 4: D.scales, ...common },
                        K);
  const words = new Uint32Array((await readback(act, nPick * ffn * 4)).buffer);
  const codes = new Int8Array(words.buffer), dOf = (p, b) => new Float32Array(words.buffer, 4 * (yScales + p * nbo + b), 1)[0];
  let err = 0, mag = 1e-30;
  for (const [p, b] of [[0, 0], [nPick - 1, nbo - 1], [nPick >> 1, nbo >> 1]]) {  // act blocks: silu(g)·u quantised
    const a = new Float32Array(32);
    for (let j = 0; j < 32; j++) {
      const row = route[p] * ffn + 32 * b + j, g = fr(refDot(G, row, x, Math.floor(p / k) * K, K, true));
      a[j] = fr(fr(g / fr(1 + Math.exp(-g))) * fr(refDot(Uw, row, x, Math.floor(p / k) * K, K, true)));
    }
    const { q, d } = quant(a, 0);
    for (let j = 0; j < 32; j++) {
      err = Math.max(err, Math.abs(codes[4 * 8 * (p * nbo + b) + j] * dOf(p, b) - q[j] * d)); mag = Math.max(mag, Math.abs(a[j]));
    }
  }
  const tag = few ? ` (TT ${few.TT}, KC ${few.KC})` : '';
  report({ shape: name, rows: ffn, K, tokens: T, experts: `${k} of ${nExp}`, tile: 'fused gate+up+swiglu, act int8' + tag, us: usGU,
           flops: 2 * 2 * ffn * K * T * k, relErr: err / mag });
  const got = await readback(y, nPick * K * 4);
  err = 0; mag = 1e-30;
  for (const [p, row] of [[0, 0], [nPick - 1, K - 1], [nPick >> 1, K >> 1]]) {  // down over the act codes as stored
    let s = 0;
    for (let b = 0; b < nbo; b++) {
      let t = 0;
      for (let j = 0; j < 32; j++) t += D.code(route[p] * K + row, 32 * b + j) * codes[4 * 8 * (p * nbo + b) + j];
      s += t * dOf(p, b) * D.scale(route[p] * K + row, b);
    }
    err = Math.max(err, Math.abs(got[p * K + row] - s)); mag = Math.max(mag, Math.abs(s));
  }
  report({ shape: name, rows: K, K: ffn, tokens: T, experts: `${k} of ${nExp}`, tile: 'down, act int8 ahead' + tag, us: usD,
           flops: 2 * ffn * K * T * k, relErr: err / mag });
  [G, Uw, D].forEach((w) => { w.codes.destroy(); w.scales.destroy(); });
  [gb, xb, act, y, slotMap, mask, pGU, pD].forEach((b) => b.destroy());
}

function report({ us, flops, relErr, ...rest }) {
  console.log(JSON.stringify({ ...rest, us: +us.toFixed(1), TFLOPs: +(flops / us / 1e6).toPrecision(3),
                               relErr: +relErr.toExponential(1) }));
}

const info = adapter.info || {};
console.log(JSON.stringify({ adapter: `${info.vendor} ${info.architecture} ${info.description}`, timestamps: hasTs }));
// --few=TT,KC: only the fused routed FFN at 512 tokens, with TT picks per pass and KC blocks staged per step in place
// of the engine's (one setting per process: in one process the later settings all ran ~5x slower on the H200, the
// engine's own setting included)
const fewArg = process.argv.find((a) => a.startsWith('--few='));
if (fewArg) {
  const [TT, KC] = fewArg.slice(6).split(',').map(Number);
  const [name, ffn, K, T, nExp, k] = tiny ? ['expert ffn (2 of 8, 96 x 64)', 96, 64, 40, 8, 2]
    : ['expert ffn (8 of 256, 512 x 2048)', 512, 2048, 512, 256, 8];
  await fusedFfn(name, ffn, K, T, nExp, k, { TT, KC });
  process.exit(0);
}
const TOKENS = tiny ? [16, 40] : [64, 256, 512];
for (const T of TOKENS) {
  if (tiny) {
    await dense('dense (300 x 128)', 300, 128, T);
    await experts('expert gate/up (2 of 8 x 64 x 96)', 64, 96, T, 8, 2, 2);
    await fusedFfn('expert ffn (2 of 8, 96 x 64)', 96, 64, T, 8, 2);
    continue;
  }
  await dense('attn_qkv (8192 x 2048)', 8192, 2048, T);
  await dense('attn_gate / q (4096 x 2048)', 4096, 2048, T);
  await dense('ssm_out / attn_out (2048 x 4096)', 2048, 4096, T);
  await experts('expert gate/up (8 of 256 x 512 x 2048)', 512, 2048, T, 256, 8, 8);
  await experts('expert down (8 of 256 x 2048 x 512)', 2048, 512, T, 256, 8, 1);
  if (T * 8 / 256 <= 16) await fusedFfn('expert ffn (8 of 256, 512 x 2048)', 512, 2048, T, 256, 8);
}
process.exit(0);
