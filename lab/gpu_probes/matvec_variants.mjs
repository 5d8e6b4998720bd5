// Q8_0 matrix-vector product variants on the GPU at hand, timed with timestamp queries: which inner loop and launch
// shape reads split code/scale planes fastest (the engine's matvec.wgsl is variant "unpack", lanes 16).
//   DAWN_NODE=path/dawn.node node lab/gpu_probes/matvec_variants.mjs [--quick]
// Prints one JSON line per (shape, variant): µs per dispatch (median of repeats, each the mean of R back-to-back
// dispatches in one pass) and GB/s of weight bytes, plus the streaming-read bandwidth of the same buffer.
// Conversions: "unpack" = unpack4xI8 + i32->f32 (a quarter-rate conversion on NVIDIA), "magic" = byte extract and
// an exponent trick (integer ops + one f32 subtract), "dp4a" = x quantised to int8 per 32-block (as llama.cpp does
// for its GPU matvec) and dot4I8Packed.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const dawn = require(process.env.DAWN_NODE);
Object.assign(globalThis, dawn.globals);
const gpu = dawn.create(['disable-dawn-features=timestamp_quantization']);
const adapter = await gpu.requestAdapter();
const hasTs = adapter.features.has('timestamp-query');
const device = await adapter.requestDevice({
  requiredFeatures: hasTs ? ['timestamp-query'] : [],
  requiredLimits: { maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
                    maxBufferSize: adapter.limits.maxBufferSize },
});
const quick = process.argv.includes('--quick');
const S = GPUBufferUsage.STORAGE, CD = GPUBufferUsage.COPY_DST, CS = GPUBufferUsage.COPY_SRC, MR = GPUBufferUsage.MAP_READ;
const med = (a) => [...a].sort((p, q) => p - q)[a.length >> 1];

function shader({ K, conv, lanes, rows, wg, xsh }) {
  const NB = K / 32;
  const dot = conv === 'dp4a'
    ? `let q0 = xq[2u * b]; let q1 = xq[2u * b + 1u];
       let si = dot4I8Packed(c0.x, q0.x) + dot4I8Packed(c0.y, q0.y) + dot4I8Packed(c0.z, q0.z) + dot4I8Packed(c0.w, q0.w)
              + dot4I8Packed(c1.x, q1.x) + dot4I8Packed(c1.y, q1.y) + dot4I8Packed(c1.z, q1.z) + dot4I8Packed(c1.w, q1.w);
       acc[i] += f32(si) * sc * xsc[b];`
    : `var s = dot(cv(c0.x), xs[0]) + dot(cv(c0.y), xs[1]) + dot(cv(c0.z), xs[2]) + dot(cv(c0.w), xs[3]);
       s += dot(cv(c1.x), xs[4]) + dot(cv(c1.y), xs[5]) + dot(cv(c1.z), xs[6]) + dot(cv(c1.w), xs[7]);
       acc[i] += s * sc;`;
  const cv = conv === 'magic'
    ? `fn cv(w: u32) -> vec4<f32> {
         let b = (vec4<u32>(w) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xffu);
         return bitcast<vec4<f32>>(b ^ vec4<u32>(0x4b000080u)) - vec4<f32>(8388736.0);
       }`
    : `fn cv(w: u32) -> vec4<f32> { return vec4<f32>(unpack4xI8(w)); }`;
  return `
@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> codes: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> scales: array<u32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read> xq: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read> xsc: array<f32>;
const NB: u32 = ${NB}u; const LANES: u32 = ${lanes}u; const ROWS: u32 = ${rows}u; const WG: u32 = ${wg}u;
const NROWS: u32 = NROWS_VALUEu;
${cv}
var<workgroup> red: array<vec4<f32>, WG>;
${xsh ? 'var<workgroup> xw: array<vec4<f32>, NB * 8u>;' : ''}
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) g: vec3<u32>, @builtin(num_workgroups) ng: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>) {
  let row0 = ((g.y * ng.x + g.x) * (WG / LANES) + l.x / LANES) * ROWS;
  let lane = l.x % LANES;
  var acc = vec4<f32>(0.0);
  ${xsh ? 'for (var j = l.x; j < NB * 8u; j += WG) { xw[j] = x[j]; } workgroupBarrier();' : ''}
  if (row0 < NROWS) {
    for (var b = lane; b < NB; b += LANES) {
      ${conv === 'dp4a' ? '' : `var xs: array<vec4<f32>, 8>; for (var j = 0u; j < 8u; j++) { xs[j] = ${xsh ? 'xw' : 'x'}[b * 8u + j]; }`}
      for (var i = 0u; i < ROWS; i++) {
        let blk = min(row0 + i, NROWS - 1u) * NB + b;
        let c0 = codes[2u * blk]; let c1 = codes[2u * blk + 1u];
        let sc = unpack2x16float(scales[blk >> 1u])[blk & 1u];
        ${dot}
      }
    }
  }
  red[l.x] = acc;
  workgroupBarrier();
  for (var s = LANES / 2u; s > 0u; s >>= 1u) {
    if (lane < s) { red[l.x] += red[l.x + s]; }
    workgroupBarrier();
  }
  if (lane == 0u) {
    for (var i = 0u; i < ROWS; i++) { if (row0 + i < NROWS) { y[row0 + i] = red[l.x][i]; } }
  }
}`;
}

const STREAM = `
@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> sink: array<u32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) ng: vec3<u32>) {
  let t = gid.y * ng.x * 256u + gid.x;
  let n = arrayLength(&src);
  var acc = vec4<u32>(0u);
  for (var i = 0u; i < 4u; i++) { let k = t + i * ((n + 3u) / 4u); if (k < n) { acc ^= src[k]; } }
  if (acc.x == 0x9e3779b9u && acc.y == 0x7f4a7c15u) { sink[t & 0xffffu] = acc.z; }
}`;

function rng(seed) { let s = seed >>> 0; return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296); }

function groups(n) { const gx = Math.min(n, 65535); return [gx, Math.ceil(n / gx)]; }

async function timeDispatches(pipe, bg, gx, gy, R) {
  const qs = device.createQuerySet({ type: 'timestamp', count: 2 });
  const res = device.createBuffer({ size: 16, usage: GPUBufferUsage.QUERY_RESOLVE | CS });
  const rb = device.createBuffer({ size: 16, usage: MR | CD });
  const out = [];
  for (let rep = 0; rep < 7; rep++) {
    const e = device.createCommandEncoder();
    const p = e.beginComputePass({ timestampWrites: { querySet: qs, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 } });
    p.setPipeline(pipe); p.setBindGroup(0, bg);
    for (let i = 0; i < R; i++) p.dispatchWorkgroups(gx, gy);
    p.end();
    e.resolveQuerySet(qs, 0, 2, res, 0); e.copyBufferToBuffer(res, 0, rb, 0, 16);
    device.queue.submit([e.finish()]);
    await rb.mapAsync(GPUMapMode.READ);
    const t = new BigUint64Array(rb.getMappedRange().slice(0));
    rb.unmap();
    if (rep > 0) out.push(Number(t[1] - t[0]) / 1e3 / R);
  }
  qs.destroy(); res.destroy(); rb.destroy();
  return med(out);
}

async function runShape(name, nrows, K, variants) {
  const NB = K / 32, nblk = nrows * NB;
  const r = rng(nrows ^ K);
  const codes = new Uint8Array(nrows * K);
  for (let i = 0; i < codes.length; i += 4) { const v = (r() * 4294967296) >>> 0; codes[i] = v; codes[i + 1] = v >> 8; codes[i + 2] = v >> 16; codes[i + 3] = v >> 24; }
  const scales = new Uint16Array(nblk + (nblk & 1));
  for (let i = 0; i < nblk; i++) scales[i] = 0x2000 + ((r() * 1024) | 0);  // ~1e-4..2e-4 as f16 bits
  const xf = new Float32Array(K); for (let i = 0; i < K; i++) xf[i] = r() * 2 - 1;
  // int8 x per 32-block (for dp4a): scale = max|x| / 127
  const xq = new Int8Array(K), xsc = new Float32Array(NB);
  for (let b = 0; b < NB; b++) {
    let m = 0; for (let j = 0; j < 32; j++) m = Math.max(m, Math.abs(xf[b * 32 + j]));
    const d = m / 127; xsc[b] = d;
    for (let j = 0; j < 32; j++) xq[b * 32 + j] = d ? Math.round(xf[b * 32 + j] / d) : 0;
  }
  const f16 = (h) => { const e = (h >> 10) & 31, f = h & 1023; return (e ? (1 + f / 1024) * 2 ** (e - 15) : f / 1024 * 2 ** -14) * (h & 0x8000 ? -1 : 1); };
  const c8 = new Int8Array(codes.buffer);
  const ref = (row, quant) => { let s = 0; for (let b = 0; b < NB; b++) { let t = 0; for (let j = 0; j < 32; j++) t += c8[row * K + b * 32 + j] * (quant ? xq[b * 32 + j] * xsc[b] : xf[b * 32 + j]); s += t * f16(scales[row * NB + b]); } return s; };
  const mk = (arr, usage = S | CD) => { const b = device.createBuffer({ size: Math.max(16, Math.ceil(arr.byteLength / 16) * 16), usage }); for (let o = 0; o < arr.byteLength; o += 64 << 20) device.queue.writeBuffer(b, o, arr.buffer, arr.byteOffset + o, Math.min(64 << 20, arr.byteLength - o)); return b; };
  const bufs = [mk(xf), mk(codes), mk(scales), device.createBuffer({ size: nrows * 4, usage: S | CS }), mk(xq), mk(xsc)];
  const weightBytes = nrows * K * 34 / 32;
  // streaming-read bound on the codes buffer
  const sp = device.createComputePipeline({ layout: 'auto', compute: { module: device.createShaderModule({ code: STREAM }), entryPoint: 'main' } });
  const sink = device.createBuffer({ size: 65536 * 4, usage: S });
  const sbg = device.createBindGroup({ layout: sp.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: bufs[1] } }, { binding: 1, resource: { buffer: sink } }] });
  const R = nrows > 100000 ? 10 : 50;
  const [sgx, sgy] = groups(Math.ceil(nrows * K / 16 / 4 / 256));
  const sus = await timeDispatches(sp, sbg, sgx, sgy, R);
  console.log(JSON.stringify({ shape: name, rows: nrows, K, variant: 'stream_read(codes only)', us: +sus.toFixed(2), GBps: +(nrows * K / sus / 1e3).toFixed(0) }));
  const rbuf = device.createBuffer({ size: nrows * 4, usage: MR | CD });
  for (const v of variants) {
    const code = shader({ K, ...v }).replace('NROWS_VALUE', String(nrows));
    const pipe = device.createComputePipeline({ layout: 'auto', compute: { module: device.createShaderModule({ code }), entryPoint: 'main' } });
    const used = v.conv === 'dp4a' ? [1, 2, 3, 4, 5] : [0, 1, 2, 3];
    const bg = device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: used.map((i) => ({ binding: i, resource: { buffer: bufs[i] } })) });
    const [gx, gy] = groups(Math.ceil(nrows / (v.wg / v.lanes * v.rows)));
    const us = await timeDispatches(pipe, bg, gx, gy, R);
    const e = device.createCommandEncoder(); e.copyBufferToBuffer(bufs[3], 0, rbuf, 0, nrows * 4); device.queue.submit([e.finish()]);
    await rbuf.mapAsync(GPUMapMode.READ); const y = new Float32Array(rbuf.getMappedRange().slice(0)); rbuf.unmap();
    let err = 0;
    for (const row of [0, 1, 2, 3, 5, 17, nrows - 1, nrows - 2, nrows >> 1]) {
      const want = ref(row, v.conv === 'dp4a'); err = Math.max(err, Math.abs(y[row] - want) / (Math.abs(want) + 1e-3));
    }
    console.log(JSON.stringify({ shape: name, nrows, K, ...v, us: +us.toFixed(2), GBps: +(weightBytes / us / 1e3).toFixed(0), relErr: +err.toExponential(1) }));
  }
  bufs.forEach((b) => b.destroy()); rbuf.destroy(); sink.destroy();
}

const info = adapter.info || {};
console.log(JSON.stringify({ adapter: `${info.vendor} ${info.architecture} ${info.description}`, timestamps: hasTs }));
if (!hasTs) { console.log('no timestamp-query: nothing measured'); process.exit(0); }
const V = [];
for (const conv of ['unpack', 'magic', 'dp4a'])
  for (const [lanes, rows, wg] of [[16, 1, 64], [16, 4, 64], [32, 1, 256], [32, 2, 256], [8, 1, 64], [8, 4, 256], [64, 1, 256]])
    V.push({ conv, lanes, rows, wg });
for (const conv of ['unpack', 'magic'])
  for (const [lanes, rows, wg] of [[16, 4, 256], [32, 4, 256], [8, 4, 256]])
    V.push({ conv, lanes, rows, wg, xsh: true });
const shapes = quick ? [['expert_gate_up', 1024, 256]]
  : [['expert_gate_up (8 x 512 x 2048)', 4096, 2048], ['expert_down (8 x 2048 x 512)', 16384, 512],
     ['attn_qkv (8192 x 2048)', 8192, 2048], ['output_head (248320 x 2048)', 248320, 2048]];
for (const [name, rows, K] of shapes) await runShape(name, rows, K, quick ? V : V);
process.exit(0);
