// CPU cost of encoding WebGPU compute work through Dawn's Node binding, per call kind: what a decoded token's
// ~100 dispatches cost before the GPU sees them (the engine encodes them on every token; compute passes have no
// bundles). Times the encoding + finish + submit of N tiny dispatches in variants, CPU only (the GPU idles), and what
// one bind group per layer on a shared pipeline layout would cost instead.
//   DAWN_NODE=path/dawn.node node lab/gpu_probes/call_costs.mjs [--shared N]   (N: the shared group's buffers, 16)
// Prints one JSON line per variant: µs per dispatch (median of repeats).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const dawn = require(process.env.DAWN_NODE || 'webgpu');
Object.assign(globalThis, dawn.globals);
const gpu = dawn.create([]);
const adapter = await gpu.requestAdapter();
// the adapter's storage-buffer limit: the shared-layout variant binds a layer's 16 buffers in one group
const device = await adapter.requestDevice({
  requiredLimits: { maxStorageBuffersPerShaderStage: Math.min(32, adapter.limits.maxStorageBuffersPerShaderStage) } });
const S = GPUBufferUsage.STORAGE, U = GPUBufferUsage.UNIFORM, CD = GPUBufferUsage.COPY_DST;
const med = (a) => [...a].sort((p, q) => p - q)[a.length >> 1];

function pipeline(nb, tag) {
  const decls = [...Array(nb).keys()].map((i) =>
    `@group(0) @binding(${i + 1}) var<storage, ${i === 0 ? 'read_write' : 'read'}> b${i}: array<f32>;`).join('\n');
  const reads = [...Array(nb).keys()].slice(1).map((i) => ` + b${i}[0]`).join('');
  const code = `struct P { a: u32, b: u32, c: u32, d: u32 }
@group(0) @binding(0) var<uniform> p: P;
${decls}
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  if (g.x == 0u) { b0[${tag}] = f32(p.a)${reads}; }
}`;
  return device.createComputePipeline({ layout: 'auto', compute: { module: device.createShaderModule({ code }), entryPoint: 'main' } });
}

function bindGroups(pipe, nb, count) {
  const out = [];
  for (let k = 0; k < count; k++) {
    const entries = [{ binding: 0, resource: { buffer: device.createBuffer({ size: 16, usage: U | CD }) } }];
    for (let i = 0; i < nb; i++) entries.push({ binding: i + 1, resource: { buffer: device.createBuffer({ size: 256, usage: S }) } });
    out.push(device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries }));
  }
  return out;
}

const EMPTY = new Uint32Array(0);
const N = 100;  // dispatches per encoder (about one token)
const REPS = 200;
const pipes2 = [pipeline(2, 0), pipeline(2, 1)], pipes8 = [pipeline(8, 0), pipeline(8, 1)];
const bg2 = [bindGroups(pipes2[0], 2, N), bindGroups(pipes2[1], 2, N)];
const bg8 = [bindGroups(pipes8[0], 8, N), bindGroups(pipes8[1], 8, N)];

// N dispatches in `submits` encoders, each finished and submitted; record(pass, i, start) encodes dispatch i of a
// pass that opened at dispatch `start`
function encodeWith(submits, record) {
  const every = Math.ceil(N / submits);
  let i = 0;
  while (i < N) {
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    const end = Math.min(N, i + every), start = i;
    for (; i < end; i++) record(pass, i, start);
    pass.end();
    device.queue.submit([enc.finish()]);
  }
}

function encode(v, submits) {
  encodeWith(submits, (pass, i, start) => {
    const p = i & 1;
    const pipes = v.nb === 8 ? pipes8 : pipes2, bgs = v.nb === 8 ? bg8 : bg2;
    if (v.setPipeline || i === start) pass.setPipeline(pipes[v.setPipeline ? p : 0]);
    if (v.setBindGroup || i === start) {
      const bg = bgs[v.setPipeline ? p : 0][v.same ? 0 : i];
      if (v.form === 'array') pass.setBindGroup(0, bg, []);
      else if (v.form === 'typed') pass.setBindGroup(0, bg, EMPTY, 0, 0);
      else pass.setBindGroup(0, bg);
    }
    if (v.xOnly) pass.dispatchWorkgroups(1); else pass.dispatchWorkgroups(1, 1, 1);
  });
}

// one JSON line: the median µs per dispatch of REPS encodings by run()
async function timeEncoding(variant, submits, run) {
  const times = [];
  for (let r = 0; r < REPS; r++) {
    const t0 = performance.now();
    run();
    times.push((performance.now() - t0) * 1000 / N);
    if (r % 20 === 19) await device.queue.onSubmittedWorkDone();
  }
  await device.queue.onSubmittedWorkDone();
  console.log(JSON.stringify({ variant, submits_per_100: submits, us_per_dispatch: +med(times).toFixed(3) }));
}

const variants = [
  { name: 'pipeline+bindgroup(2)+dispatch', nb: 2, setPipeline: true, setBindGroup: true },
  { name: 'pipeline+bindgroup(8)+dispatch', nb: 8, setPipeline: true, setBindGroup: true },
  { name: 'bindgroup(8)+dispatch', nb: 8, setPipeline: false, setBindGroup: true },
  { name: 'bindgroup(8, [])+dispatch', nb: 8, setPipeline: false, setBindGroup: true, form: 'array' },
  { name: 'bindgroup(8, Uint32Array, 0, 0)+dispatch', nb: 8, setPipeline: false, setBindGroup: true, form: 'typed' },
  { name: 'same bindgroup set again+dispatch', nb: 8, setPipeline: false, setBindGroup: true, same: true },
  { name: 'dispatch only', nb: 8, setPipeline: false, setBindGroup: false },
  { name: 'pipeline+bindgroup(8)+dispatch(x)', nb: 8, setPipeline: true, setBindGroup: true, xOnly: true },
];
// What one bind group per layer would cost (every pipeline on one explicit layout of a uniform + SHARED storage
// buffers, each kernel reading its own few): setPipeline + dispatch, the group set once per LAYER dispatches, against
// the engine's form (a new group of 8 per dispatch) in the same process
const sharedArg = process.argv.indexOf('--shared');
const SHARED = Math.min(sharedArg > 0 ? Number(process.argv[sharedArg + 1]) : 16,
  device.limits.maxStorageBuffersPerShaderStage), LAYER = 6;
const sharedBgl = device.createBindGroupLayout({ entries: [
  { binding: 0, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'uniform' } },
  ...[...Array(SHARED).keys()].map((i) => ({ binding: i + 1, visibility: GPUShaderStage.COMPUTE,
    buffer: { type: 'storage' } }))] });
const sharedLayout = device.createPipelineLayout({ bindGroupLayouts: [sharedBgl] });
const sharedPipes = [...Array(LAYER).keys()].map((k) => {
  const decls = [...Array(SHARED).keys()].map((i) =>
    `@group(0) @binding(${i + 1}) var<storage, read_write> b${i}: array<f32>;`).join('\n');
  const code = `struct P { a: u32, b: u32, c: u32, d: u32 }
@group(0) @binding(0) var<uniform> p: P;
${decls}
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  if (g.x == 0u) { b${k % SHARED}[0] = f32(p.a) + b${(k + 1) % SHARED}[0] + b${(k + 2) % SHARED}[0]; }
}`;
  return device.createComputePipeline({ layout: sharedLayout,
    compute: { module: device.createShaderModule({ code }), entryPoint: 'main' } });
});
const sharedGroups = [...Array(Math.ceil(N / LAYER)).keys()].map(() => device.createBindGroup({ layout: sharedBgl,
  entries: [{ binding: 0, resource: { buffer: device.createBuffer({ size: 16, usage: U | CD }) } },
    ...[...Array(SHARED).keys()].map((i) => ({ binding: i + 1,
      resource: { buffer: device.createBuffer({ size: 256, usage: S }) } }))] }));

function encodeShared(submits) {
  encodeWith(submits, (pass, i, start) => {
    pass.setPipeline(sharedPipes[i % LAYER]);
    if (i % LAYER === 0 || i === start) pass.setBindGroup(0, sharedGroups[Math.floor(i / LAYER)]);
    pass.dispatchWorkgroups(1, 1, 1);
  });
}

for (const submits of [1, 5]) {
  await timeEncoding(`pipeline+dispatch, one bindgroup(${SHARED}) per ${LAYER} (shared layout)`, submits,
    () => encodeShared(submits));
}
for (const submits of [1, 5]) {
  for (const v of variants) await timeEncoding(v.name, submits, () => encode(v, submits));
}
// the await the engine pays once per token: an empty submit's onSubmittedWorkDone, and a 4-byte map read
const buf = device.createBuffer({ size: 256, usage: GPUBufferUsage.MAP_READ | CD });
const waits = [], maps = [];
for (let r = 0; r < 100; r++) {
  let t0 = performance.now();
  device.queue.submit([]);
  await device.queue.onSubmittedWorkDone();
  waits.push((performance.now() - t0) * 1000);
  t0 = performance.now();
  await buf.mapAsync(GPUMapMode.READ, 0, 4);
  buf.unmap();
  maps.push((performance.now() - t0) * 1000);
}
console.log(JSON.stringify({ variant: 'await', onSubmittedWorkDone_us: +med(waits).toFixed(1), mapAsync_us: +med(maps).toFixed(1) }));
process.exit(0);
