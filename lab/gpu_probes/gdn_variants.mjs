// The prefill's DeltaNet recurrence over a chunk, kernel variants on the GPU at hand, at the real model's shape
// (16 key heads, 32 value heads, 128 × 128 state per head, 512 rows): shaders/gdn_recurrent_cols.wgsl with 2 (the
// engine's), 1, 4 or 8 lanes per value column; two also without the loads of the rows ahead (the arithmetic's own
// bound). (The 256-lane layout of 8 lanes per column it replaced took 562 µs:
// docs/results/2026-12-04-h200-gdn-prefill-layouts.json.)
//   DAWN_NODE=path/dawn.node node lab/gpu_probes/gdn_variants.mjs [--tiny]
// Prints one JSON line per variant: µs per dispatch (median of repeats), µs per row, and the largest difference
// of its outputs from the first variant's, relative to the largest |output|.
import { assemble, dawnDevice, gpuTools, rng } from './gpu_timing.mjs';

const { device, hasTs } = await dawnDevice();
const tiny = process.argv.includes('--tiny');
const S = GPUBufferUsage.STORAGE, CD = GPUBufferUsage.COPY_DST, CS = GPUBufferUsage.COPY_SRC;
const U = GPUBufferUsage.UNIFORM;
const { mkbuf, time, readback } = gpuTools(device, hasTs);

const [nk, nv, dk, dv, T] = tiny ? [2, 4, 32, 32, 16] : [16, 32, 128, 128, 512];
const stride = 2 * nk * dk + nv * dv;
const r = rng(1);
const rand = (n, s = 1) => Float32Array.from({ length: n }, () => (r() * 2 - 1) * s);
const qkv = mkbuf(rand(T * stride));
const gates = mkbuf(rand(T * 2 * nv, 2));
const dt = mkbuf(rand(nv)), a = mkbuf(Float32Array.from({ length: nv }, () => -Math.exp(r())));
const scales = mkbuf(Float32Array.from({ length: T * nk * 4 }, (_, i) => (i % 4 === 3 ? 0 : 0.1 + r() * 0.1)));
const state0 = rand(nv * dk * dv, 0.1);
const params = new ArrayBuffer(48), pv = new DataView(params);
[nk, nv, dk, dv, 0, nk * dk, 2 * nk * dk].forEach((v, i) => pv.setUint32(4 * i, v, true));
pv.setFloat32(28, 1e-6, true); pv.setUint32(32, stride, true); pv.setUint32(36, 2 * nv, true); pv.setUint32(40, nv * dv, true);
const pbuf = mkbuf(new Uint8Array(params), U | CD);
const chunk = mkbuf(new Uint32Array([T, 1, 0, 0]), U | CD);

const cols = (sl) => assemble('gdn_recurrent_cols.wgsl', { DK: dk, SL: sl });
const noload = (code) => code.replace('if (row + 2u < chunk.n) {  // row + 2', 'if (false) {  //');
// [name, WGSL, value columns per workgroup]
const variants = [
  ['cols_sl2', cols(2), 16],
  ['cols_sl1', cols(1), 32],
  ['cols_sl4', cols(4), 8],
  ['cols_sl8', cols(8), 4],
  // the same without the loads of the rows ahead (each row computes on the first rows' inputs): the arithmetic's bound
  ['cols_sl2_noload', noload(cols(2)), 16],
  ['cols_sl4_noload', noload(cols(4)), 8],
];
for (const [n, c] of variants) if (n.endsWith('noload') && !c.includes('if (false)')) throw new Error(`${n}: no change made`);

// the GPU's clock rises only after some work (the H200 idles at 345 MHz): half a second of the first variant first
{
  const code = variants[0][1], module = device.createShaderModule({ code });
  const pipe = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
  const state = mkbuf(state0, S | CD | CS), out = device.createBuffer({ size: 4 * T * nv * dv, usage: S | CS });
  const bg = device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: [pbuf, chunk, qkv, gates, dt, a, state, out, scales]
    .map((buffer, binding) => ({ binding, resource: { buffer } })) });
  const t0 = performance.now();
  while (performance.now() - t0 < 500) await time(pipe, bg, Math.ceil(dv / 32), nv, 3);
}
const only = (process.argv.find((x) => x.startsWith('--only=')) || '').slice(7).split(',').filter(Boolean);
let ref = null;
for (const [name, code, per] of variants) {
  if (only.length && name !== variants[0][0] && !only.includes(name)) continue;
  const module = device.createShaderModule({ code });
  const pipe = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
  const state = mkbuf(state0, S | CD | CS), out = device.createBuffer({ size: 4 * T * nv * dv, usage: S | CS });
  const bg = device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: [pbuf, chunk, qkv, gates, dt, a, state, out, scales]
    .map((buffer, binding) => ({ binding, resource: { buffer } })) });
  // one dispatch from the initial state for the comparison, then the timing (the state moves on)
  const e = device.createCommandEncoder(); const p = e.beginComputePass();
  p.setPipeline(pipe); p.setBindGroup(0, bg); p.dispatchWorkgroups(Math.ceil(dv / per), nv); p.end();
  device.queue.submit([e.finish()]);
  const y = await readback(out, 4 * T * nv * dv);
  let err = 0, big = 0;
  if (ref) for (let i = 0; i < y.length; i++) { err = Math.max(err, Math.abs(y[i] - ref[i])); big = Math.max(big, Math.abs(ref[i])); }
  else ref = y;
  const us = await time(pipe, bg, Math.ceil(dv / per), nv, 3);
  console.log(JSON.stringify({ variant: name, shape: [nk, nv, dk, dv], rows: T, us: +us.toFixed(1),
    us_per_row: +(us / T).toFixed(3), rel_err: big ? err / big : 0 }));
}
