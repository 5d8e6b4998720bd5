// What awaiting the GPU costs Node's garbage collector through Dawn's Node binding: while a GPU promise
// (onSubmittedWorkDone, mapAsync) is pending, the binding polls the device on every turn of the event loop, and
// each turn leaves JS objects behind. Counts V8's collections (Node's `gc` performance entries) during: an idle
// second, one long GPU wait, many short ones, and the long wait again. No model; runs on any adapter (lavapipe too).
//   DAWN_NODE=path/dawn.node node lab/gpu_probes/wait_garbage.mjs [--groups N]   (N: the long job's workgroups)
// Prints one JSON line per case: wall ms, collections by kind, their ms.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const dawn = require(process.env.DAWN_NODE);
Object.assign(globalThis, dawn.globals);
const arg = process.argv.indexOf('--groups');
const groups = arg > 0 ? Number(process.argv[arg + 1]) : 1024;
const gpu = dawn.create([]); // held: collecting the instance while its device lives crashes the binding
const device = await (await gpu.requestAdapter()).requestDevice();

const kinds = { 1: 'minor', 4: 'major', 8: 'incremental', 16: 'weak' };
const seen = [];
new PerformanceObserver((l) => { for (const e of l.getEntries()) seen.push([e.detail.kind, e.duration]); })
  .observe({ entryTypes: ['gc'] });

// a busy kernel: each invocation a long dependent chain, so `groups` sets how long the GPU works
const code = `@group(0) @binding(0) var<storage, read_write> b: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3u) {
  var x = b[g.x % 65536u];
  for (var i = 0u; i < 20000u; i++) { x = x * 1.0001 + 0.5; }
  b[g.x % 65536u] = x;
}`;
const pipe = device.createComputePipeline({
  layout: 'auto', compute: { module: device.createShaderModule({ code }), entryPoint: 'main' } });
const buf = device.createBuffer({ size: 4 * 65536, usage: GPUBufferUsage.STORAGE });
const bg = device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: buf } }] });

async function job(n) {
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  pass.setPipeline(pipe); pass.setBindGroup(0, bg); pass.dispatchWorkgroups(n); pass.end();
  device.queue.submit([enc.finish()]);
  await device.queue.onSubmittedWorkDone();
}

const tick = (ms) => new Promise((r) => setTimeout(r, ms));
async function measure(name, body) {
  await tick(50);
  seen.length = 0;
  const t0 = performance.now();
  await body();
  const ms = performance.now() - t0;
  await tick(0); // entries reach the observer a task after the collection
  const by = {};
  for (const [k, d] of seen) {
    const key = kinds[k] || String(k);
    by[key] = by[key] || { count: 0, ms: 0 };
    by[key].count++; by[key].ms = Math.round((by[key].ms + d) * 1000) / 1000;
  }
  console.log(JSON.stringify({ case: name, wall_ms: Math.round(ms), collections: seen.length, by_kind: by }));
}

await job(64); await job(64); // compile and warm up
await measure('idle 1 s (no GPU promise pending)', () => tick(1000));
await measure(`one wait (${groups} groups)`, () => job(groups));
await measure('200 short waits (1 group each)', async () => { for (let i = 0; i < 200; i++) await job(1); });
await measure(`one wait (${groups} groups), again`, () => job(groups));
process.exit(0);
