// What a persistent decode would gain over one dispatch per product, measured on a chain of real-sized products
// with the engine's own arithmetic. Each product is the DeltaNet input product's shape (12,352 rows of 2,048, Q8_0,
// x quantised while staged: the engine's x_stage_q8, row_reduce4 and group_sum4) and reads the first 2,048 values
// the product before it wrote, so each depends on the last, as a token's products do. P products, each its own
// weights (~27 MB each, more in all than the L2 cache holds), run three ways:
//   - one dispatch per product: the engine's matvec.wgsl, Dawn's barrier between them;
//   - one persistent dispatch: its workgroups take the products in turn, the rows in tiles as the engine's launch
//     cuts them, and meet at a barrier across the grid between two products (an atomic counter, every wait
//     bounded: grid_barrier.mjs);
//   - the same, each workgroup first loading one word of every weight block of its first tile of the next product
//     (each into its own register, used only after the barrier) and only then waiting at the barrier: those
//     weights come into the L2 cache while the grid meets (with a grid of one workgroup per tile: all of them).
// The persistent forms at several grid sizes. Their outputs must be the dispatches' bit for bit (the same
// arithmetic in the same order): where they are not, a workgroup read a value another one stored before the
// barrier that it did not yet see, and the form's figures do not count.
//   DAWN_NODE=path/dawn.node node lab/gpu_probes/persistent_chain.mjs [--tiny]
// Prints per form µs per product (the slope between chains of 2 and P products), whether its outputs match, and
// timed-out waits.
import { assemble, dawnDevice, gpuTools, gridBarrierWgsl, matvecLaunch, med, rng } from './gpu_timing.mjs';

const { device, hasTs } = await dawnDevice(['maxStorageBufferBindingSize', 'maxBufferSize']);
const tiny = process.argv.includes('--tiny');
const S = GPUBufferUsage.STORAGE, CD = GPUBufferUsage.COPY_DST, CS = GPUBufferUsage.COPY_SRC;
const U = GPUBufferUsage.UNIFORM;
const { mkbuf, readback, countedPassUs } = gpuTools(device, hasTs);
const r = rng(41);

const [ROWS_N, COLS, P] = tiny ? [256, 256, 4] : [12352, 2048, 12];
const NB = COLS / 32;
const { lanes: LANES, per: PER, groups: TILES } = matvecLaunch(ROWS_N, NB);   // the engine's launch
const XV = Math.ceil(ROWS_N / 4 / 16) * 16;   // vec4 per activation (256-byte aligned)
const GRIDS = tiny ? [1] : [264, 528, TILES];
const SPIN_CAP = 1 << 20;

// weights: P matrices one after another (random codes; scales near 1 / (127 sqrt(COLS)) keep the chain's values
// of order one)
const blocks = P * ROWS_N * NB;
const codes = new Uint32Array(blocks * 8);
for (let i = 0; i < codes.length; i++) codes[i] = (r() * 4294967296) >>> 0;
const scales = Uint16Array.from({ length: blocks + (blocks & 1) }, () => 0x0a00 + ((r() * 256) | 0));
const wCodes = mkbuf(codes), wScales = mkbuf(scales);
const x0 = Float32Array.from({ length: 4 * XV }, () => r() * 2 - 1);

const common = { WFMT: 'q8', XFMT: 'q8', LANES, ROWS: PER, STAGED_BLOCKS: NB, WG: 64, ACCUMULATE: 'false', NORM: 'none',
  ARGMAX: 'none', XN: 'f32' };
// a shader text with the engine's includes inserted (gpu_timing.assemble does it for a file of shaders/)
const withIncludes = (text) => {
  const seen = new Set();
  return text.replace(/^[ \t]*#include[ \t]+"([^"]+)"[ \t]*$/gm, (_, inc) =>
    seen.has(inc) ? '' : assemble(inc, common, seen));
};

const persistent = (prefetch) => withIncludes(`
@group(0) @binding(1) var<storage, read_write> x: array<vec4<f32>>;   // two activations: [0, XV) and [XV, 2 XV)
@group(0) @binding(2) var<storage, read_write> counters: array<atomic<u32>, 4>;  // arrivals, -, timeouts, -
@group(0) @binding(6) var<storage, read_write> sink: array<u32>;
#include "weights_q8.wgsl"
#include "x_stage_q8.wgsl"
#include "block_dot_q8.wgsl"
const LANES: u32 = ${LANES}u;
const ROWS: u32 = ${PER}u;
const WG: u32 = 64u;   // group_sum4.wgsl's tree
#include "row_reduce4.wgsl"
const R: u32 = ${ROWS_N}u;
const NB: u32 = ${NB}u;
const TILES: u32 = ${TILES}u;
const XV: u32 = ${XV}u;
const P: u32 = ${P}u;
const PF: u32 = ${PER * (NB / LANES)}u;

${gridBarrierWgsl(SPIN_CAP)}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) ng: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let lane = lid.x % LANES;
  var kept = 0u;
  for (var ph = 0u; ph < P; ph++) {
    stage_x(lid.x, 64u, (ph & 1u) * XV, NB);
    let out = ((ph + 1u) & 1u) * XV;
    for (var g = wg.x; g < TILES; g += ng.x) {
      let row0 = (g * (64u / LANES) + lid.x / LANES) * ROWS;
      let total = group_sum(rows_partial(row0, lane, ph * R, R, NB), lid.x);
      if (lane == 0u) {
        for (var i = 0u; i < ROWS; i++) {
          let row = row0 + i;
          if (row < R) {
            x[out + row / 4u][row % 4u] = total[i];
          }
        }
      }
    }
    ${prefetch ? `var pf: array<u32, PF>;   // one word per weight block of this workgroup's first tile of the next
    if (ph + 1u < P && wg.x < TILES) {   // product, each in its own register: nothing waits for them before the barrier
      let row0 = (wg.x * (64u / LANES) + lid.x / LANES) * ROWS;
      for (var i = 0u; i < ROWS; i++) {
        let row = (ph + 1u) * R + min(row0 + i, R - 1u);
        for (var j = 0u; j < NB / LANES; j++) {
          pf[i * (NB / LANES) + j] = w_codes[2u * (row * NB + lane + j * LANES)].x;
        }
      }
    }` : ''}
    grid_barrier(lid.x, (ph + 1u) * ng.x);
    ${prefetch ? `for (var k = 0u; k < PF; k++) {   // used only now: the loads were in flight while the grid met
      kept ^= pf[k];
    }` : ''}
  }
  if (kept == 0x9e3779b9u) {
    sink[0] = kept;
  }
}`);

const counters = device.createBuffer({ size: 16, usage: S | CD | CS });
const sink = device.createBuffer({ size: 16, usage: S });

// one pass of `record(pass)`: its µs and the timed-out waits it counted
async function timed(record) {
  const { us, counts } = await countedPassUs(counters, record);
  return { us, timeouts: counts[2] };
}

// µs per product: the slope between chains of 2 and P products (median of 5 each, after one untimed)
async function perProduct(run) {
  const few = [], many = [];
  let timeouts = 0;
  for (let rep = 0; rep < 6; rep++) {
    for (const [n, into] of [[2, few], [P, many]]) {
      const t = await run(n);
      timeouts += t.timeouts;
      if (rep > 0) into.push(t.us);
    }
  }
  return { us: (med(many) - med(few)) / (P - 2), few: med(few), many: med(many), timeouts };
}

// one dispatch per product: the engine's matvec.wgsl, the activations in two buffers in turn
const xa = mkbuf(x0, S | CD | CS), xb = device.createBuffer({ size: 16 * XV, usage: S | CS });
const mv = device.createComputePipeline({ layout: 'auto', compute: { entryPoint: 'main',
  module: device.createShaderModule({ code: assemble('matvec.wgsl', common) }) } });
const mvParams = mkbuf(new Uint32Array([ROWS_N, NB, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), U | CD);
const mvGroups = Array.from({ length: P }, (_, ph) => device.createBindGroup({ layout: mv.getBindGroupLayout(0),
  entries: [{ binding: 0, resource: { buffer: mvParams } },
    { binding: 1, resource: { buffer: ph % 2 ? xb : xa } }, { binding: 2, resource: { buffer: ph % 2 ? xa : xb } },
    { binding: 3, resource: { buffer: wCodes, offset: ph * ROWS_N * NB * 32, size: ROWS_N * NB * 32 } },
    { binding: 4, resource: { buffer: wScales, offset: ph * ROWS_N * NB * 2, size: ROWS_N * NB * 2 } }] }));
const dispatches = (n) => timed((pass) => {
  pass.setPipeline(mv);
  for (let ph = 0; ph < n; ph++) { pass.setBindGroup(0, mvGroups[ph]); pass.dispatchWorkgroups(TILES); }
});
{   // the GPU's clock rises only after some work: half a second first
  const t0 = performance.now();
  while (performance.now() - t0 < (tiny ? 50 : 500)) { device.queue.writeBuffer(xa, 0, x0); await dispatches(P); }
}
device.queue.writeBuffer(xa, 0, x0);
await dispatches(P);
const ref = await readback(P % 2 ? xb : xa, 4 * ROWS_N);
const d = await perProduct(async (n) => { device.queue.writeBuffer(xa, 0, x0); return dispatches(n); });
console.log(JSON.stringify({ form: 'one dispatch per product', workgroups: TILES, products: P,
  us_per_product: +d.us.toFixed(2), us_chain_of_2: +d.few.toFixed(2), us_chain: +d.many.toFixed(2),
  same_as_dispatches: true, timeouts: 0 }));

const xp = device.createBuffer({ size: 32 * XV, usage: S | CD | CS });
for (const prefetch of [false, true]) {
  const pipe = device.createComputePipeline({ layout: 'auto', compute: { entryPoint: 'main',
    module: device.createShaderModule({ code: persistent(prefetch) }) } });
  // a chain of n products: the same shader with P products, stopped early by a shorter weight range is not
  // possible, so a chain of 2 runs the first two products of a 2-product pipeline
  const pipe2 = device.createComputePipeline({ layout: 'auto', compute: { entryPoint: 'main',
    module: device.createShaderModule({ code: persistent(prefetch).replace(`const P: u32 = ${P}u;`, 'const P: u32 = 2u;') }) } });
  const group = (p) => device.createBindGroup({ layout: p.getBindGroupLayout(0), entries: [
    { binding: 1, resource: { buffer: xp } }, { binding: 2, resource: { buffer: counters } },
    { binding: 3, resource: { buffer: wCodes } }, { binding: 4, resource: { buffer: wScales } },
    { binding: 6, resource: { buffer: sink } }] });
  const groups = new Map([[pipe, group(pipe)], [pipe2, group(pipe2)]]);
  for (const grid of GRIDS) {
    const run = (n) => {
      device.queue.writeBuffer(xp, 0, x0);
      const p = n === P ? pipe : pipe2;
      return timed((pass) => { pass.setPipeline(p); pass.setBindGroup(0, groups.get(p)); pass.dispatchWorkgroups(grid); });
    };
    const first = await run(P);
    const out = await readback(xp, 32 * XV);
    const got = new Float32Array(out.buffer, (P % 2) * 16 * XV, ROWS_N);
    let same = first.timeouts === 0;
    for (let i = 0; i < ROWS_N && same; i++) same = Object.is(got[i], ref[i]);
    const t = await perProduct(run);
    console.log(JSON.stringify({ form: prefetch ? "persistent, next product's first tile loaded before the barrier"
      : 'persistent', workgroups: grid, products: P, us_per_product: +t.us.toFixed(2),
    us_chain_of_2: +t.few.toFixed(2), us_chain: +t.many.toFixed(2), same_as_dispatches: same,
    timeouts: t.timeouts + first.timeouts }));
  }
}
process.exit(0);
