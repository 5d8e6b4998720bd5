// Does WGSL reach the GPU's matrix units here? Dawn offers `chromium-experimental-subgroup-matrix` (Vulkan's
// VK_KHR_cooperative_matrix) behind its allow_unsafe_apis toggle where the driver has it. This prints the adapter's
// features and subgroup-matrix configurations, then times a Q8_0 × Q8_0 prefill GEMM (the int8 product of
// gemm_tile_q8.wgsl: Σ_blocks d_w·d_x · Σ q_w·q_x) done with int8 subgroup-matrix products, one per 32-column
// block and tile, each block's i32 tile scaled into f32 accumulators through workgroup memory (the block scales
// differ per row and token, and a subgroup matrix has no per-element access), on the real model's dense shapes,
// and the same loads and products without the block scales. One subgroup per workgroup: the matrix built-ins need
// workgroup-uniform offsets, which a subgroup's share of a larger workgroup is not for WGSL's analysis.
//   DAWN_NODE=path/dawn.node node lab/gpu_probes/gemm_mma.mjs [--tiny]
// Prints one JSON line per (shape, tokens, variant): µs per dispatch (median), TFLOP/s (2 · rows · K · tokens)
// and the largest error of sampled outputs against a JS reference, relative to the largest |output|.
import { createRequire } from 'node:module';
import { f16, gpuTools, rng } from './gpu_timing.mjs';

const require = createRequire(import.meta.url);
const dawn = require(process.env.DAWN_NODE || 'webgpu');
Object.assign(globalThis, dawn.globals);
const gpu = dawn.create(['enable-dawn-features=allow_unsafe_apis', 'disable-dawn-features=timestamp_quantization']);
const adapter = await gpu.requestAdapter();
const info = adapter.info || {};
const configs = [...(info.subgroupMatrixConfigs || [])].map((c) => (
  { ct: c.componentType, rt: c.resultComponentType, M: c.M, N: c.N, K: c.K }));
console.log(JSON.stringify({ adapter: `${info.vendor} ${info.architecture} ${info.description}`,
  features: [...adapter.features].sort(), subgroups: [info.subgroupMinSize, info.subgroupMaxSize], configs,
  wgStorage: adapter.limits.maxComputeWorkgroupStorageSize }));
const SGM = 'chromium-experimental-subgroup-matrix';
if (!adapter.features.has(SGM)) { console.log(JSON.stringify({ result: `no ${SGM} on this adapter` })); process.exit(0); }
const want = ['timestamp-query', 'subgroups', SGM].filter((f) => adapter.features.has(f));
const device = await adapter.requestDevice({ requiredFeatures: want,
  requiredLimits: { maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
                    maxBufferSize: adapter.limits.maxBufferSize,
                    maxComputeWorkgroupStorageSize: adapter.limits.maxComputeWorkgroupStorageSize } });
device.addEventListener?.('uncapturederror', (e) => console.log(JSON.stringify({ uncaptured: e.error.message })));
const hasTs = adapter.features.has('timestamp-query');
const tiny = process.argv.includes('--tiny');
const SG = info.subgroupMaxSize || 32;
const S = GPUBufferUsage.STORAGE, CD = GPUBufferUsage.COPY_DST, CS = GPUBufferUsage.COPY_SRC;
const U = GPUBufferUsage.UNIFORM;
const { mkbuf, time, readback } = gpuTools(device, hasTs);

function toF16Bits(v) {  // nearest f16 (normal range, round to nearest even) of a finite v
  const b = new Uint32Array(new Float32Array([v]).buffer)[0];
  const s = (b >>> 16) & 0x8000, e = ((b >>> 23) & 255) - 127 + 15, m = b & 0x7fffff;
  if (e <= 0) return s;
  let h = s | (e << 10) | (m >>> 13); const rest = m & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (h & 1))) h += 1;
  return h;
}
async function compile(code, label) {
  device.pushErrorScope('validation');
  const module = device.createShaderModule({ code });
  const ci = await module.getCompilationInfo();
  const msgs = ci.messages.filter((m) => m.type === 'error').map((m) => `${m.lineNum}:${m.linePos} ${m.message}`);
  let pipe = null;
  try { pipe = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } }); }
  catch (e) { msgs.push(String(e)); }
  const err = await device.popErrorScope();
  if (err) msgs.push(err.message);
  if (msgs.length) { console.log(JSON.stringify({ variant: label, compile: msgs.slice(0, 4) })); return null; }
  return pipe;
}

// How subgroupMatrixLoad counts an i8 matrix's offset and stride in an array<i32> (components or words): [offset
// divisor, stride divisor]; set by checkUnits() on a small GEMM checked in full.
let UNITS = [1, 1];

// --- the int8 kernel: a workgroup of one subgroup owning TM × TN tiles of (c.M tokens × c.N rows); it walks K
// block by block: c.K-deep products into i32 tiles, stored to workgroup memory, read back per lane (lane: column
// n = lane % N, rows m = lane / N + step · (SG / N)) and added as d_w·d_x·Σ to f32 registers. Every tile its own
// variable (straight-line code).
function int8Kernel(c, TM, TN, units = UNITS) {
  const off = (e) => (units[0] === 1 ? e : `(${e}) / ${units[0]}u`);
  const stride = units[1] === 1 ? 'p.k' : `p.k / ${units[1]}u`;
  const T = TM * TN, E = (c.M * c.N) / SG, steps = 32 / c.K;
  const L = `subgroup_matrix_left<i8, ${c.K}, ${c.M}>`, R = `subgroup_matrix_right<i8, ${c.N}, ${c.K}>`;
  let body = '';
  // Every tile starts from a product, never from a declared-but-unset matrix: a function variable is hoisted to
  // the function's start in SPIR-V, and a matrix declared in the loop was found not zeroed again per iteration.
  for (let s = 0; s < steps; s++) {
    const col = `b * 32u + ${s * c.K}u`;
    for (let i = 0; i < TM; i++)
      body += `    let l${i}_${s} = subgroupMatrixLoad<${L}>(&xq, ${off(`(t0 + ${i * c.M}u) * p.k + ${col}`)}, false, ${stride});\n`;
    for (let j = 0; j < TN; j++) {
      body += `    let q${j}_${s} = subgroupMatrixLoad<${R}>(&wq, ${off(`(r0 + ${j * c.N}u) * p.k + ${col}`)}, true, ${stride});\n`;
      for (let i = 0; i < TM; i++) body += s === 0
        ? `    var c${i * TN + j} = subgroupMatrixMultiply<i32>(l${i}_${s}, q${j}_${s});\n`
        : `    c${i * TN + j} = subgroupMatrixMultiplyAccumulate(l${i}_${s}, q${j}_${s}, c${i * TN + j});\n`;
    }
  }
  for (let t = 0; t < T; t++) body += `    subgroupMatrixStore(&part, ${t * c.M * c.N}u, c${t}, false, ${c.N}u);\n`;
  return `enable chromium_experimental_subgroup_matrix;
struct Params { rows: u32, k: u32, tokens: u32, pad: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> xq: array<i32>;
@group(0) @binding(2) var<storage, read> xd: array<f32>;
@group(0) @binding(3) var<storage, read> wq: array<i32>;
@group(0) @binding(4) var<storage, read> wd: array<u32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
var<workgroup> part: array<i32, ${T * c.M * c.N}>;
fn w_scale(blk: u32) -> f32 { return unpack2x16float(wd[blk >> 1u])[blk & 1u]; }
@compute @workgroup_size(${SG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
  let r0 = wg.x * ${TN * c.N}u;
  let t0 = wg.y * ${TM * c.M}u;
  let nb = p.k / 32u;
  let n = lane % ${c.N}u;
  let m0 = lane / ${c.N}u;
  var acc: array<f32, ${T * E}>;
  for (var b = 0u; b < nb; b++) {
${body}    workgroupBarrier();
    for (var t = 0u; t < ${T}u; t++) {
      let dw = w_scale((r0 + (t % ${TN}u) * ${c.N}u + n) * nb + b);
      for (var e = 0u; e < ${E}u; e++) {
        let m = m0 + e * ${SG / c.N}u;
        let dx = xd[(t0 + (t / ${TN}u) * ${c.M}u + m) * nb + b];
        acc[t * ${E}u + e] += (dw * dx) * f32(part[t * ${c.M * c.N}u + m * ${c.N}u + n]);
      }
    }
    workgroupBarrier();
  }
  for (var t = 0u; t < ${T}u; t++) {
    for (var e = 0u; e < ${E}u; e++) {
      let tok = t0 + (t / ${TN}u) * ${c.M}u + m0 + e * ${SG / c.N}u;
      y[tok * p.rows + r0 + (t % ${TN}u) * ${c.N}u + n] = acc[t * ${E}u + e];
    }
  }
}
`;
}

// --- the matrix units' ceiling here: the same loads and products, but one i32 sum over all of K per tile (no block
// scales: a wrong product for Q8_0, timed only to show what the per-block scaling costs).
function int8CeilingKernel(c, TM, TN) {
  const T = TM * TN, E = (c.M * c.N) / SG;
  const L = `subgroup_matrix_left<i8, ${c.K}, ${c.M}>`, R = `subgroup_matrix_right<i8, ${c.N}, ${c.K}>`;
  const loads = (k) => {
    let b = '';
    for (let i = 0; i < TM; i++) b += `    let l${i} = subgroupMatrixLoad<${L}>(&xq, (t0 + ${i * c.M}u) * p.k + ${k}, false, p.k);\n`;
    for (let j = 0; j < TN; j++) b += `    let q${j} = subgroupMatrixLoad<${R}>(&wq, (r0 + ${j * c.N}u) * p.k + ${k}, true, p.k);\n`;
    return b;
  };
  let body = `  {\n${loads('0u')}`;
  for (let t = 0; t < T; t++) body += `    c${t} = subgroupMatrixMultiply<i32>(l${(t / TN) | 0}, q${t % TN});\n`;
  body += `  }\n  for (var k = ${c.K}u; k < p.k; k += ${c.K}u) {\n${loads('k')}`;
  for (let t = 0; t < T; t++) body += `    c${t} = subgroupMatrixMultiplyAccumulate(l${(t / TN) | 0}, q${t % TN}, c${t});\n`;
  body += '  }\n';
  for (let t = 0; t < T; t++) body += `  subgroupMatrixStore(&part, ${t * c.M * c.N}u, c${t}, false, ${c.N}u);\n`;
  let decl = '';
  for (let t = 0; t < T; t++) decl += `  var c${t}: subgroup_matrix_result<i32, ${c.N}, ${c.M}>;\n`;
  return `enable chromium_experimental_subgroup_matrix;
struct Params { rows: u32, k: u32, tokens: u32, pad: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> xq: array<i32>;
@group(0) @binding(3) var<storage, read> wq: array<i32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
var<workgroup> part: array<i32, ${T * c.M * c.N}>;
@compute @workgroup_size(${SG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
  let r0 = wg.x * ${TN * c.N}u;
  let t0 = wg.y * ${TM * c.M}u;
${decl}${body}  workgroupBarrier();
  for (var t = 0u; t < ${T}u; t++) {
    for (var e = 0u; e < ${E}u; e++) {
      let m = lane / ${c.N}u + e * ${SG / c.N}u;
      let n = lane % ${c.N}u;
      y[(t0 + (t / ${TN}u) * ${c.M}u + m) * p.rows + r0 + (t % ${TN}u) * ${c.N}u + n] = f32(part[t * ${c.M * c.N}u + m * ${c.N}u + n]);
    }
  }
}
`;
}

function report(o, flops) {
  const { us, relErr, ...rest } = o;
  console.log(JSON.stringify({ ...rest, us: +us.toFixed(1), TFLOPs: +(flops / us / 1e6).toPrecision(3),
                               relErr: +relErr.toExponential(1) }));
}

async function dense(name, rows, K, T) {
  const r = rng(rows ^ K ^ T), nb = K / 32;
  const wq = new Int8Array(rows * K); for (let i = 0; i < wq.length; i++) wq[i] = (r() * 256 | 0) - 128;
  const wdBits = new Uint16Array(rows * nb + 2); for (let i = 0; i < rows * nb; i++) wdBits[i] = 0x2000 + ((r() * 1024) | 0);
  const xq = new Int8Array(T * K); for (let i = 0; i < xq.length; i++) xq[i] = (r() * 255 | 0) - 127;
  const xd = new Float32Array(T * nb); for (let i = 0; i < xd.length; i++) xd[i] = f16(toF16Bits(0.001 + r() * 0.01));
  const ref = (row, t) => {
    let s = 0;
    for (let b = 0; b < nb; b++) {
      let q = 0; for (let j = 0; j < 32; j++) q += wq[row * K + 32 * b + j] * xq[t * K + 32 * b + j];
      s += f16(wdBits[row * nb + b]) * xd[t * nb + b] * q;
    }
    return s;
  };
  const samples = [[0, 0], [rows - 1, T - 1], [rows >> 1, T >> 1], [1, T - 1], [rows - 2, 0], [17, 33 % T], [rows - 33, 5]];
  const params = mkbuf(new Uint32Array([rows, K, T, 0]), U | CD);
  const bufs = { 0: params, 1: mkbuf(xq), 2: mkbuf(xd), 3: mkbuf(wq), 4: mkbuf(wdBits),
                 5: device.createBuffer({ size: T * rows * 4, usage: S | CS | CD }) };
  const R = tiny ? 2 : Math.max(3, Math.min(50, Math.round(2e10 / (2 * rows * K * T))));
  const check = async () => {
    const got = await readback(bufs[5], T * rows * 4);
    let err = 0, mag = 1e-30;
    for (const [row, t] of samples) { const w = ref(row, t); err = Math.max(err, Math.abs(got[t * rows + row] - w)); mag = Math.max(mag, Math.abs(w)); }
    device.queue.writeBuffer(bufs[5], 0, new Float32Array(T * rows));
    return err / mag;
  };
  for (const c of configs.filter((c) => c.ct === 'i8' && c.rt === 'i32' && 32 % c.K === 0)) {
    for (const [TM, TN] of [[2, 2], [2, 4], [4, 2], [4, 4]]) {
      const variant = `i8 ${c.M}x${c.N}x${c.K} tiles ${TM}x${TN}`;
      if (T % (TM * c.M) || rows % (TN * c.N)) continue;
      if (TM * TN * c.M * c.N * 4 > adapter.limits.maxComputeWorkgroupStorageSize) continue;
      const pipe = await compile(int8Kernel(c, TM, TN), variant);
      if (!pipe) continue;
      const bg = device.createBindGroup({ layout: pipe.getBindGroupLayout(0),
        entries: Object.entries(bufs).map(([binding, buffer]) => ({ binding: +binding, resource: { buffer } })) });
      const gx = rows / (TN * c.N), gy = T / (TM * c.M);
      const us = await time(pipe, bg, gx, gy, R);
      report({ shape: name, rows, K, tokens: T, variant, us, relErr: await check() }, 2 * rows * K * T);
    }
  }
  for (const c of configs.filter((c) => c.ct === 'i8' && c.rt === 'i32')) {
    for (const [TM, TN] of [[2, 2], [2, 4], [4, 4]]) {
      const variant = `i8 ${c.M}x${c.N}x${c.K} tiles ${TM}x${TN}, no block scales (ceiling)`;
      if (T % (TM * c.M) || rows % (TN * c.N)) continue;
      const pipe = await compile(int8CeilingKernel(c, TM, TN), variant);
      if (!pipe) continue;
      const bg = device.createBindGroup({ layout: pipe.getBindGroupLayout(0),
        entries: [0, 1, 3, 5].map((binding) => ({ binding, resource: { buffer: bufs[binding] } })) });
      const us = await time(pipe, bg, rows / (TN * c.N), T / (TM * c.M), R);
      report({ shape: name, rows, K, tokens: T, variant, us, relErr: NaN }, 2 * rows * K * T);
    }
  }
  Object.values(bufs).forEach((b) => b.destroy());
}

async function checkUnits() {
  const c = configs.find((c) => c.ct === 'i8' && c.rt === 'i32' && 32 % c.K === 0);
  const rows = 64, K = 256, T = 32, nb = K / 32, r = rng(5);
  const wq = new Int8Array(rows * K).map(() => (r() * 256 | 0) - 128), xq = new Int8Array(T * K).map(() => (r() * 255 | 0) - 127);
  const wdBits = new Uint16Array(rows * nb).fill(0x3c00), xd = new Float32Array(T * nb).fill(1);
  const bufs = { 0: mkbuf(new Uint32Array([rows, K, T, 0]), U | CD), 1: mkbuf(xq), 2: mkbuf(xd), 3: mkbuf(wq), 4: mkbuf(wdBits),
                 5: device.createBuffer({ size: T * rows * 4, usage: S | CS | CD }) };
  const good = [];
  for (const units of [[1, 1], [4, 1], [4, 4], [1, 4]]) {
    const pipe = await compile(int8Kernel(c, 2, 2, units), `units ${units}`);
    if (!pipe) continue;
    device.queue.writeBuffer(bufs[5], 0, new Float32Array(T * rows));
    const bg = device.createBindGroup({ layout: pipe.getBindGroupLayout(0),
      entries: Object.entries(bufs).map(([binding, buffer]) => ({ binding: +binding, resource: { buffer } })) });
    const e = device.createCommandEncoder(); const ps = e.beginComputePass();
    ps.setPipeline(pipe); ps.setBindGroup(0, bg); ps.dispatchWorkgroups(rows / (2 * c.N), T / (2 * c.M)); ps.end();
    device.queue.submit([e.finish()]);
    const got = await readback(bufs[5], T * rows * 4);
    let bad = 0, first = null;
    for (let t = 0; t < T; t++) for (let row = 0; row < rows; row++) {
      let q = 0; for (let j = 0; j < K; j++) q += wq[row * K + j] * xq[t * K + j];
      if (got[t * rows + row] !== q) { bad++; if (!first) first = { t, row, got: got[t * rows + row], want: q }; }
    }
    console.log(JSON.stringify({ units, config: `${c.M}x${c.N}x${c.K}`, wrong: bad, of: T * rows, first }));
    if (!bad) good.push(units);
  }
  Object.values(bufs).forEach((b) => b.destroy());
  return good;
}

const good = await checkUnits();
if (!good.length) { console.log(JSON.stringify({ result: 'no offset/stride reading gives the exact product' })); process.exit(0); }
UNITS = good[0];
for (const T of tiny ? [64] : [512, 64]) {
  if (tiny) { await dense('dense (256 x 128)', 256, 128, T); continue; }
  await dense('attn_qkv (8192 x 2048)', 8192, 2048, T);
  await dense('ssm_out / attn_out (2048 x 4096)', 2048, 4096, T);
}
process.exit(0);
