// The GPU's fixed costs under the decode's kernels, without a model: what one dispatch costs when it depends on the
// one before (Dawn puts a barrier between them), when it does not, and what a workgroup barrier costs inside a
// kernel, and what one memory round trip costs a lane that waits for it (a chain of dependent loads through a buffer
// that fits the L2 cache, and through one that does not). The decode runs ~56 dependent dispatches per token, each a
// few round trips and reductions long; these figures say how much of its time is that structure rather than the
// bytes its kernels move.
//   DAWN_NODE=path/dawn.node node lab/gpu_probes/dispatch_chain.mjs [--tiny]
// Prints one JSON line per case: µs per dispatch (R back-to-back dispatches in one compute pass, timestamps at the
// pass's ends, median of repeats) and, for the barrier cases, µs per barrier against the same kernel without them.
import { dawnDevice, gpuTools, med } from './gpu_timing.mjs';

const { device, hasTs } = await dawnDevice(['maxStorageBufferBindingSize', 'maxBufferSize']);
const tiny = process.argv.includes('--tiny');
const S = GPUBufferUsage.STORAGE, CS = GPUBufferUsage.COPY_SRC, MR = GPUBufferUsage.MAP_READ, CD = GPUBufferUsage.COPY_DST;
const { readback } = gpuTools(device, hasTs);
const R = tiny ? 8 : 200;                          // dispatches per pass
const GRID = tiny ? 8 : 576;                       // the decode's routed gate/up launches 576 workgroups of 64

// Each lane adds one to its own word: a dispatch reads what the one before wrote (Dawn orders them with a barrier).
// BARRIERS > 0: the lanes also pass that many workgroup barriers, each after a step through workgroup memory (the
// trees' pattern: write, barrier, read a neighbour).
const kernel = (barriers) => `
@group(0) @binding(0) var<storage, read_write> y: array<u32>;
var<workgroup> sh: array<u32, 64>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>) {
  var v = y[g.x] + 1u;
  for (var i = 0u; i < ${barriers}u; i++) {
    sh[l.x] = v;
    workgroupBarrier();
    v = sh[(l.x + 1u) & 63u] + (v & 1u);
    workgroupBarrier();
  }
  y[g.x] = select(v, y[g.x] + 1u, ${barriers}u == 0u);
}`;

function pipeline(code) {
  return device.createComputePipeline({ layout: 'auto', compute: { module: device.createShaderModule({ code }), entryPoint: 'main' } });
}
const bindTo = (pipe, buf) => device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: buf } }] });

// µs per dispatch: `record(pass)` encodes R dispatches; timestamps where the device has them, else the wall clock
async function perDispatch(record) {
  const out = [];
  const qs = hasTs ? device.createQuerySet({ type: 'timestamp', count: 2 }) : null;
  const res = hasTs ? device.createBuffer({ size: 16, usage: GPUBufferUsage.QUERY_RESOLVE | CS }) : null;
  const rb = hasTs ? device.createBuffer({ size: 16, usage: MR | CD }) : null;
  for (let rep = 0; rep < 7; rep++) {
    const t0 = performance.now();
    const e = device.createCommandEncoder();
    const p = e.beginComputePass(hasTs ? { timestampWrites: { querySet: qs, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 } } : {});
    record(p); p.end();
    if (hasTs) { e.resolveQuerySet(qs, 0, 2, res, 0); e.copyBufferToBuffer(res, 0, rb, 0, 16); }
    device.queue.submit([e.finish()]);
    let us;
    if (hasTs) {
      await rb.mapAsync(GPUMapMode.READ);
      const t = new BigUint64Array(rb.getMappedRange().slice(0)); rb.unmap();
      us = Number(t[1] - t[0]) / 1e3;
    } else {
      await device.queue.onSubmittedWorkDone();
      us = (performance.now() - t0) * 1e3;
    }
    if (rep > 0) out.push(us / R);
  }
  return med(out);
}

const print = (o) => console.log(JSON.stringify(o));
const words = GRID * 64;
const flat = pipeline(kernel(0));
const bufs = Array.from({ length: R }, () => device.createBuffer({ size: 4 * words, usage: S | CS }));
const groups = bufs.map((b) => bindTo(flat, b));

// warm the GPU's clock first (it rises only after some work)
{ const t0 = performance.now(); while (performance.now() - t0 < 500) await perDispatch((p) => { p.setPipeline(flat); for (let i = 0; i < R; i++) { p.setBindGroup(0, groups[0]); p.dispatchWorkgroups(GRID); } }); }

for (const grid of [1, GRID]) {
  const chain = await perDispatch((p) => { p.setPipeline(flat); p.setBindGroup(0, groups[0]); for (let i = 0; i < R; i++) p.dispatchWorkgroups(grid); });
  const apart = await perDispatch((p) => { p.setPipeline(flat); for (let i = 0; i < R; i++) { p.setBindGroup(0, groups[i]); p.dispatchWorkgroups(grid); } });
  print({ case: 'dispatches, each reading the one before', workgroups: grid, dispatches: R, us: +chain.toFixed(2) });
  print({ case: 'dispatches on separate buffers', workgroups: grid, dispatches: R, us: +apart.toFixed(2) });
}

// the chain's result: every word incremented once per dispatch (a benchmark that counted nothing would fail here)
{
  const before = new Uint32Array((await readback(bufs[0], 4 * words)).buffer);
  await perDispatch((p) => { p.setPipeline(flat); p.setBindGroup(0, groups[0]); for (let i = 0; i < R; i++) p.dispatchWorkgroups(GRID); });
  const after = new Uint32Array((await readback(bufs[0], 4 * words)).buffer);
  const ok = after.every((v, i) => v - before[i] === 7 * R);
  print({ case: 'chain check', words, increments_per_word: after[words - 1] - before[words - 1], expected: 7 * R, ok });
  if (!ok) process.exit(1);
}

const base = await perDispatch((p) => { p.setPipeline(flat); p.setBindGroup(0, groups[0]); for (let i = 0; i < R; i++) p.dispatchWorkgroups(GRID); });
for (const n of tiny ? [4] : [8, 32]) {
  const pipe = pipeline(kernel(n)), bg = bindTo(pipe, bufs[0]);
  const us = await perDispatch((p) => { p.setPipeline(pipe); p.setBindGroup(0, bg); for (let i = 0; i < R; i++) p.dispatchWorkgroups(GRID); });
  print({ case: 'workgroup barriers in each dispatch', workgroups: GRID, barriers: 2 * n, us: +us.toFixed(2),
    us_per_barrier: +((us - base) / (2 * n)).toFixed(3) });
}

// Dependent loads: every lane follows its own chain of `steps` indices through a buffer of `words` u32 (a random
// cycle, so neither the cache lines nor the prefetcher help), as many lanes as the product launches.
const chase = (steps) => `
@group(0) @binding(0) var<storage, read> next: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  var i = (g.x * 7919u) % arrayLength(&next);
  for (var s = 0u; s < ${steps}u; s++) {
    i = next[i];
  }
  y[g.x] = i;
}`;
for (const mb of tiny ? [1] : [4, 512]) {
  const words = (mb << 20) / 4, stride = 4099;   // stride: ~16 KB apart, coprime with words (a power of two)
  const cycle = new Uint32Array(words);
  for (let j = 0; j < words; j++) cycle[j] = (j + stride * 16 + 1) % words;
  const next = device.createBuffer({ size: 4 * words, usage: S | CD });
  for (let o = 0; o < words; o += 16 << 20) device.queue.writeBuffer(next, 4 * o, cycle, o, Math.min(16 << 20, words - o));
  const out = device.createBuffer({ size: 4 * GRID * 64, usage: S | CS });
  const times = [];
  for (const steps of [1, 33]) {
    const pipe = pipeline(chase(steps));
    const bg = device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: [
      { binding: 0, resource: { buffer: next } }, { binding: 1, resource: { buffer: out } }] });
    times.push(await perDispatch((p) => { p.setPipeline(pipe); p.setBindGroup(0, bg); for (let i = 0; i < R; i++) p.dispatchWorkgroups(GRID); }));
  }
  print({ case: 'dependent loads per lane', buffer_mb: mb, workgroups: GRID, us_1_load: +times[0].toFixed(2),
    us_33_loads: +times[1].toFixed(2), us_per_round_trip: +((times[1] - times[0]) / 32).toFixed(3) });
}
