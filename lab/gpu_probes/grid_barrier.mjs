// Whether a decode could run as one persistent dispatch per token: workgroups that stay resident and meet at a
// barrier across the whole grid between the products, instead of one dispatch each with Dawn's barrier between
// them. What that needs, measured here: the cost of such a grid barrier (an atomic counter each workgroup adds to,
// then waits on), against the ~2.2 µs a dispatch costs (dispatch_chain.mjs); and whether a value another workgroup
// stored before the barrier is the one read after it. WGSL promises neither: its atomics are relaxed, its
// storageBarrier orders memory within a workgroup only, and nothing guarantees that the workgroups of a dispatch run
// at the same time. So every wait here gives up after a bounded spin (the whole dispatch then stops waiting), and the
// figures say, for this GPU and driver, how often a read saw a stale value and whether a barrier ever timed out.
//   DAWN_NODE=path/dawn.node node lab/gpu_probes/grid_barrier.mjs [--tiny]
// First the adapter's limits that bound one kernel holding a whole layer (its buffers in one shader stage). Then per
// (workgroups, mode): µs per barrier (the slope between dispatches of few and many phases), stale reads out of
// the reads made, timed-out barriers. Modes: "plain" (each workgroup stores its value with a plain store and reads
// another's with a plain load) and "atomic" (atomicStore / atomicLoad). A plain store read by an atomic load would
// need one buffer at two writable bindings, which WebGPU refuses. Then the streaming phases (below): µs per phase of
// a product-sized read, one dispatch per phase against a persistent dispatch with and without the next phase's
// loads issued before its barrier.
import { dawnDevice, gpuTools, gridBarrierWgsl, med } from './gpu_timing.mjs';

const { adapter, device, hasTs } = await dawnDevice(['maxStorageBufferBindingSize', 'maxBufferSize']);   // the streaming phases bind 256 MB
const { countedPassUs } = gpuTools(device, hasTs);
// what one kernel holding a whole layer would need from the adapter: its buffers in one shader stage, its storage
console.log(JSON.stringify({ adapter_limits: Object.fromEntries(['maxStorageBuffersPerShaderStage',
  'maxUniformBuffersPerShaderStage', 'maxBindingsPerBindGroup', 'maxStorageBufferBindingSize',
  'maxComputeWorkgroupStorageSize', 'maxComputeInvocationsPerWorkgroup', 'maxComputeWorkgroupsPerDimension']
  .map((k) => [k, adapter.limits[k]])) }));
const tiny = process.argv.includes('--tiny');
const S = GPUBufferUsage.STORAGE, CD = GPUBufferUsage.COPY_DST, CS = GPUBufferUsage.COPY_SRC;
const U = GPUBufferUsage.UNIFORM;
// a CPU adapter runs a workgroup to its end before it starts another one: only a grid of one can meet there
const GRIDS = tiny ? [1] : [132, 264, 528, 1056, 2112];
const PHASES = tiny ? [2, 20] : [10, 1010];
const SPIN_CAP = 1 << 20;   // spins of one wait before the dispatch stops waiting
const MODES = ['plain', 'atomic'];

const code = /* wgsl */ `
struct Params { phases: u32, mode: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
// [0] arrivals (every workgroup adds one per phase), [1] stale reads, [2] timed-out waits, [3] reads made
@group(0) @binding(1) var<storage, read_write> counters: array<atomic<u32>, 4>;
@group(0) @binding(2) var<storage, read_write> plain: array<u32>;          // two slots per workgroup (phase parity)
@group(0) @binding(3) var<storage, read_write> shared_slots: array<atomic<u32>>;

fn value(phase: u32, g: u32) -> u32 {
  return phase * 2654435761u + g * 40503u + 1u;
}

${gridBarrierWgsl(SPIN_CAP)}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) ng: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let g = wg.x;
  let n = ng.x;
  let t = lid.x;
  for (var ph = 0u; ph < p.phases; ph++) {
    let slot = (ph & 1u) * n;   // double-buffered: a slot is written again only two barriers after it was read
    if (t == 0u) {
      if (p.mode == 1u) {
        atomicStore(&shared_slots[slot + g], value(ph, g));
      } else {
        plain[slot + g] = value(ph, g);
      }
    }
    grid_barrier(t, (ph + 1u) * n);
    if (t == 0u) {
      let src = (g + 1u + ph * 7u) % n;   // another workgroup's value (its own where the grid is one)
      var got = 0u;
      if (p.mode == 0u) {
        got = plain[slot + src];
      } else {
        got = atomicLoad(&shared_slots[slot + src]);
      }
      atomicAdd(&counters[3], 1u);
      if (got != value(ph, src)) {
        atomicAdd(&counters[1], 1u);
      }
    }
  }
}`;
const module = device.createShaderModule({ code });
const pipe = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
const maxGrid = Math.max(...GRIDS);
const counters = device.createBuffer({ size: 16, usage: S | CD | CS });
const plain = device.createBuffer({ size: 8 * maxGrid, usage: S });
const slots = device.createBuffer({ size: 8 * maxGrid, usage: S });

// µs of one pass that record(pass) fills, and the counters it left
async function counted(record) {
  const { us, counts: [arrivals, stale, timeouts, reads] } = await countedPassUs(counters, record);
  return { us, arrivals, stale, timeouts, reads };
}

// one dispatch of `grid` workgroups over `phases` phases: its µs and the counters
async function run(grid, phases, mode) {
  const params = device.createBuffer({ size: 16, usage: U | CD });
  device.queue.writeBuffer(params, 0, new Uint32Array([phases, mode, 0, 0]));
  const bg = device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: [
    { binding: 0, resource: { buffer: params } }, { binding: 1, resource: { buffer: counters } },
    { binding: 2, resource: { buffer: plain } }, { binding: 3, resource: { buffer: slots } }] });
  const r = await counted((pass) => { pass.setPipeline(pipe); pass.setBindGroup(0, bg); pass.dispatchWorkgroups(grid); });
  params.destroy();
  return r;
}

// the GPU's clock rises only after some work: half a second first
{
  const t0 = performance.now();
  while (performance.now() - t0 < (tiny ? 50 : 500)) await run(GRIDS[0], PHASES[1], 1);
}
for (const grid of GRIDS) {
  for (const [mode, name] of MODES.entries()) {
    const few = [], many = [];
    let stale = 0, timeouts = 0, reads = 0, arrivals = 0;
    for (let rep = 0; rep < 5; rep++) {
      for (const [phases, into] of [[PHASES[0], few], [PHASES[1], many]]) {
        const r = await run(grid, phases, mode);
        into.push(r.us);
        stale += r.stale; timeouts += r.timeouts; reads += r.reads; arrivals += r.arrivals;
      }
    }
    const perBarrier = (med(many) - med(few)) / (PHASES[1] - PHASES[0]);
    console.log(JSON.stringify({ workgroups: grid, mode: name, us_per_barrier: +perBarrier.toFixed(3),
      us_few: +med(few).toFixed(2), us_many: +med(many).toFixed(2), phases: PHASES, reads, stale, timeouts,
      arrivals, expected_arrivals: 5 * grid * (PHASES[0] + PHASES[1]) }));
  }
}

// Streaming phases: what a persistent decode would gain. Each phase every lane reads PER vec4 of a cold region
// (~8.6 MB a phase over the grid, a product's weights; the regions cycle through 256 MB, past the L2 cache), then
// the grid meets. "after" issues a phase's loads after the barrier before it, as a dispatch per product must;
// "prefetch" issues the next phase's loads before it waits, as a persistent kernel could with weights (they do not
// depend on the phase before). Against them, one dispatch per phase (the engine's way). µs per phase, each the slope
// between few and many phases; the bound is the phase's bytes at the streaming-read rate (bench_stream_read).
// Then the same with a dependency, as the decode's products have: each phase first reads the 2,048-value
// activation the grid wrote in the phase before (8 KB, from the L2 cache) and writes its share of the next; the
// prefetched form still issues the weights' loads before its barrier, the input's after it. (These reads of
// another workgroup's plain stores are for timing; the first part says whether they see the stored values.)
const SG = tiny ? 1 : 528, PER = tiny ? 4 : 16;
const phaseVec4 = SG * 64 * PER, regions = tiny ? 4 : Math.floor((256 << 20) / (16 * phaseVec4));
const ACT_VEC4 = 512;   // a 2,048-value activation: what a phase's product reads after the barrier and writes
const streamCode = (prefetch, persistent, dep) => /* wgsl */ `
struct Params { phases: u32, phase0: u32, pad: u32, regions: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> counters: array<atomic<u32>, 4>;
@group(0) @binding(2) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> sink: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> act: array<vec4<u32>>;   // two activations (phase parity)
const PER: u32 = ${PER}u;
const ACT_VEC4: u32 = ${ACT_VEC4}u;
const PHASE_VEC4: u32 = ${phaseVec4}u;

${gridBarrierWgsl(SPIN_CAP)}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) ng: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let i = wg.x * 64u + lid.x;
  let stride = ng.x * 64u;
  var acc = vec4<u32>(0u);
  var v: array<vec4<u32>, PER>;
  ${prefetch ? `let b0 = (p.phase0 % p.regions) * PHASE_VEC4 + i;
  for (var k = 0u; k < PER; k++) {
    v[k] = src[b0 + k * stride];
  }` : ''}
  for (var ph = 0u; ph < p.phases; ph++) {
    ${prefetch ? `var w: array<vec4<u32>, PER>;
    let nb = ((p.phase0 + ph + 1u) % p.regions) * PHASE_VEC4 + i;
    if (ph + 1u < p.phases) {
      for (var k = 0u; k < PER; k++) {
        w[k] = src[nb + k * stride];
      }
    }` : `let b = ((p.phase0 + ph) % p.regions) * PHASE_VEC4 + i;
    for (var k = 0u; k < PER; k++) {
      v[k] = src[b + k * stride];
    }`}
    ${dep ? `var s = vec4<u32>(0u);   // the input the grid wrote in the phase before, 8 vec4 per lane
    let par_in = ((p.phase0 + ph) & 1u) * ACT_VEC4;
    for (var k = lid.x; k < ACT_VEC4; k += 64u) {
      s ^= act[par_in + k];
    }` : 'let s = vec4<u32>(0u);'}
    for (var k = 0u; k < PER; k++) {
      acc ^= v[k] ^ s;
    }
    ${dep ? `if (lid.x == 0u) {   // this workgroup's share of the next phase's input
      act[((p.phase0 + ph + 1u) & 1u) * ACT_VEC4 + wg.x % ACT_VEC4] = acc;
    }` : ''}
    ${persistent ? 'grid_barrier(lid.x, (ph + 1u) * ng.x);' : ''}
    ${prefetch ? 'v = w;' : ''}
  }
  if (all(acc == vec4<u32>(0x9e3779b9u))) {   // never with random data: keeps the loads live
    sink[i] = acc;
  }
}`;

{
  const total = regions * phaseVec4;
  const srcBuf = device.createBuffer({ size: 16 * total, usage: S | CD });
  const chunk = new Uint32Array(1 << 20);
  for (let i = 0; i < chunk.length; i++) chunk[i] = (Math.imul(i, 2654435761) ^ (i >>> 7)) >>> 0;
  for (let o = 0; o < 16 * total; o += chunk.byteLength)
    device.queue.writeBuffer(srcBuf, o, chunk.buffer, 0, Math.min(chunk.byteLength, 16 * total - o));
  const sink = device.createBuffer({ size: 16 * SG * 64, usage: S });
  const act = device.createBuffer({ size: 16 * 2 * ACT_VEC4, usage: S });
  const layout = device.createBindGroupLayout({ entries: [
    { binding: 0, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'uniform', hasDynamicOffset: true } },
    { binding: 1, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'storage' } },
    { binding: 2, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'read-only-storage' } },
    { binding: 3, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'storage' } },
    { binding: 4, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'storage' } }] });
  const plLayout = device.createPipelineLayout({ bindGroupLayouts: [layout] });
  const pipeOf = (c) => device.createComputePipeline({ layout: plLayout,
    compute: { module: device.createShaderModule({ code: c }), entryPoint: 'main' } });
  const MAXD = tiny ? 20 : 200;   // dispatches of one phase each: params at 256-byte steps, phase0 = d
  const params = device.createBuffer({ size: 256 * MAXD, usage: U | CD });
  const bg = (phases) => {
    const words = new Uint32Array(64 * MAXD);
    for (let d = 0; d < MAXD; d++) words.set([phases, d, 0, regions], 64 * d);
    device.queue.writeBuffer(params, 0, words);
    return device.createBindGroup({ layout, entries: [
      { binding: 0, resource: { buffer: params, size: 16 } }, { binding: 1, resource: { buffer: counters } },
      { binding: 2, resource: { buffer: srcBuf } }, { binding: 3, resource: { buffer: sink } },
      { binding: 4, resource: { buffer: act } }] });
  };
  // µs of one pass: `dispatches` dispatches of `phases` phases each
  async function timePass(pipe, phases, dispatches) {
    const group = bg(phases);
    const out = [];
    let timeouts = 0;
    for (let rep = 0; rep < 6; rep++) {
      const r = await counted((pass) => {
        pass.setPipeline(pipe);
        for (let d = 0; d < dispatches; d++) { pass.setBindGroup(0, group, [256 * d]); pass.dispatchWorkgroups(SG); }
      });
      timeouts += r.timeouts;
      if (rep > 0) out.push(r.us);
    }
    return { us: med(out), timeouts };
  }
  const [few, many] = tiny ? [2, 20] : [20, 200];
  const forms = [];
  for (const dep of [false, true]) {
    const tag = dep ? ', reading the activation the phase before wrote' : '';
    forms.push([`one dispatch per phase${tag}`, streamCode(false, false, dep), (n) => [1, n], dep],
      [`persistent, loads after the barrier${tag}`, streamCode(false, true, dep), (n) => [n, 1], dep],
      [`persistent, next phase prefetched${tag}`, streamCode(true, true, dep), (n) => [n, 1], dep]);
  }
  for (const [form, c, shape, dep] of forms) {
    const pipe = pipeOf(c);
    const a = await timePass(pipe, ...shape(few)), b = await timePass(pipe, ...shape(many));
    console.log(JSON.stringify({ streaming: form, dependent: dep, workgroups: SG, phase_bytes: 16 * phaseVec4,
      us_per_phase: +((b.us - a.us) / (many - few)).toFixed(3), timeouts: a.timeouts + b.timeouts }));
  }
}
process.exit(0);
