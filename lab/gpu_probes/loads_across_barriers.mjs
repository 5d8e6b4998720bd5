// Whether a lane's global loads stay in flight while its workgroup passes barriers. Three engine changes that issued
// a product's (or the recurrence's) first loads before the staging of its input in workgroup memory made it slower
// (a9b8ca4 and de7434f; docs/results/2026-12-04-h200-fixed-costs.json), as if a barrier waited for the lane's loads to
// return
// (the staging's steps then follow the round trip instead of overlapping it). This times that alone, without a
// model: each lane loads L vec4 words of a buffer the L2 cache does not hold (every dispatch its own slice) and
// passes S steps of a staging (write workgroup memory, barrier, read a neighbour's word, barrier), in both orders,
// against the loads alone and the staging alone; then the same with subgroup shuffles for the staging's steps
// where the device has subgroups (no barrier). If the loads overlap the staging, "loads, then staging" costs about
// the larger of the two alone; if the barriers wait for them, about what "staging, then loads" costs (their sum).
//   DAWN_NODE=path/dawn.node node lab/gpu_probes/loads_across_barriers.mjs [--tiny]
// One JSON line per case: µs per dispatch (R dependent dispatches in one pass: each reads what the one before
// wrote, as the decode's do), and a check that every form computed what it should (the staging's rotation of the
// lanes' words, one increment per dispatch); a form that computed anything else ends the run with an error.
import { dawnDevice, gpuTools } from './gpu_timing.mjs';

const { device, hasTs } = await dawnDevice(['maxStorageBufferBindingSize', 'maxBufferSize'], ['subgroups']);
const tiny = process.argv.includes('--tiny');
const { medianPassUs, passUs, readback } = gpuTools(device, hasTs);
const S = GPUBufferUsage.STORAGE, CS = GPUBufferUsage.COPY_SRC, CD = GPUBufferUsage.COPY_DST;
const R = tiny ? 4 : 100;            // dispatches per pass
const GRID = tiny ? 4 : 576;         // workgroups of 64 (the decode's routed gate/up launch)
const L = 4;                         // vec4 loads per lane (a product's first step: 4 weight blocks ahead)
const STEPS = tiny ? [6] : [6, 24, 96];
const LANES = GRID * 64;
const SLICE = LANES * L * 16;        // bytes a dispatch loads (2.4 MB at 576 workgroups; 256-aligned)
const subgroups = device.features.has('subgroups');

// The kernel: `loads` and `staging` in the order given ('' leaves one out). The staging's barrier form rotates the
// lanes' words by one per step within the workgroup; its shuffle form exchanges them with lanes 1, 2, 4 apart in
// turn (a multiple of 6 steps leaves every word where it was). The loaded words (zeros) are added to the result, so
// no compiler can drop the loads; it cannot know they are zero.
const loadsWgsl = Array.from({ length: L }, (_, k) => `  w += src[${k}u * ${LANES}u + g.x];`).join('\n');
const stagingWgsl = (steps, shuffles) => shuffles ? `
  for (var i = 0u; i < ${steps}u; i++) {
    v = subgroupShuffleXor(v, 1u << (i % 3u));
  }` : `
  for (var i = 0u; i < ${steps}u; i++) {
    sh[l.x] = v;
    workgroupBarrier();
    v = sh[(l.x + 1u) & 63u];
    workgroupBarrier();
  }`;
const kernel = (parts, shuffles) => `${shuffles ? 'enable subgroups;' : ''}
@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
var<workgroup> sh: array<u32, 64>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>) {
  var v = y[g.x];
  var w = vec4<u32>(0u);
${parts.join('\n')}
  y[g.x] = v + 1u + w.x + w.y + w.z + w.w;
}`;

const src = device.createBuffer({ size: R * SLICE, usage: S });   // zeros
const y = device.createBuffer({ size: 4 * LANES, usage: S | CS | CD });
device.queue.writeBuffer(y, 0, Uint32Array.from({ length: LANES }, (_, i) => i * 2654435761 >>> 0));

function form(parts, shuffles = false) {
  const module = device.createShaderModule({ code: kernel(parts, shuffles) });
  const pipe = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
  const loads = parts.includes(loadsWgsl);   // without them `layout: 'auto'` has no binding 0
  const groups = Array.from({ length: R }, (_, d) => device.createBindGroup({ layout: pipe.getBindGroupLayout(0),
    entries: [...(loads ? [{ binding: 0, resource: { buffer: src, offset: d * SLICE, size: SLICE } }] : []),
      { binding: 1, resource: { buffer: y } }] }));
  return (p) => { p.setPipeline(pipe); for (let d = 0; d < R; d++) { p.setBindGroup(0, groups[d]); p.dispatchWorkgroups(GRID); } };
}

const readY = async () => new Uint32Array((await readback(y, 4 * LANES)).buffer);

// One pass of the form, then its result against what it must be: lane l of a workgroup holds, after R dispatches
// that each rotate by `rotate`, the word lane (l + R · rotate) mod 64 held before, plus R.
async function check(record, rotate) {
  const before = await readY();
  await passUs(record);
  const after = await readY();
  for (let i = 0; i < LANES; i++) {
    const from = (i & ~63) | ((i + R * rotate) & 63);
    if (after[i] !== ((before[from] + R) >>> 0)) return false;
  }
  return true;
}

const print = (o) => console.log(JSON.stringify(o));
async function timed(name, steps, record, rotate, extra = {}) {
  if (!(await check(record, rotate))) {
    console.error(`${name}, ${steps} steps: the result is not the staging's rotation plus one per dispatch`);
    process.exit(1);
  }
  const us = (await medianPassUs(record)) / R;
  print({ case: name, steps, workgroups: GRID, loads_per_lane: L, us: +us.toFixed(3), ...extra });
  return us;
}

// warm the GPU's clock first (it rises only after some work)
{ const f = form([loadsWgsl]); const t0 = performance.now(); while (performance.now() - t0 < (tiny ? 50 : 500)) await passUs(f); }

const loadsAlone = await timed('loads alone', 0, form([loadsWgsl]), 0);
for (const shuffles of subgroups ? [false, true] : [false]) {
  const how = shuffles ? 'subgroup shuffles' : 'workgroup barriers';
  for (const steps of STEPS) {
    const rotate = shuffles ? 0 : steps;
    const stage = stagingWgsl(steps, shuffles);
    const alone = await timed(`staging alone (${how})`, steps, form([stage], shuffles), rotate);
    const after = await timed(`staging, then loads (${how})`, steps, form([stage, loadsWgsl], shuffles), rotate);
    const first = await timed(`loads, then staging (${how})`, steps, form([loadsWgsl, stage], shuffles), rotate);
    // where "loads, then staging" lies between overlap (0: the larger alone) and none (1: staging, then loads)
    const overlap = Math.max(alone, loadsAlone), serial = after;
    print({ case: `overlap of loads and staging (${how})`, steps,
      loads_first_between_overlap_0_and_serial_1: serial > overlap ? +((first - overlap) / (serial - overlap)).toFixed(2) : null });
  }
}
if (!subgroups) print({ case: 'subgroup shuffles', skipped: 'the adapter has no subgroups' });
