// How the time of the decode's main kernels grows with the workgroups they launch: each kernel (the engine's
// shader, assembled as the engine does, at the real model's shape and launch) is timed on the first W of its
// workgroups for W from a few to all. Every workgroup does the same work, so while the GPU holds all W at once the
// time stays near one workgroup's chain; a step up where the GPU can no longer hold them (registers, workgroup
// memory) means a second wave. Kernels: the routed gate/up, the down products + sums, the DeltaNet input product, a
// product at ssm_out's shape, the output head. Variants: the input's staging sized for 256 blocks (the widest
// product; the engine sizes it to the pipeline's own blocks), the other number of blocks per lane and step (the
// engine: four with one row per lane group, else one), other rows per lane group; each is checked against the engine's form (same outputs, bit for bit, expected).
//   DAWN_NODE=path/dawn.node node lab/gpu_probes/wave_sweep.mjs [--tiny]
// Prints one JSON line per (kernel, workgroups): µs per dispatch (back-to-back dispatches in one pass, median of
// repeats); per kernel whether its outputs are the engine form's; then per kernel the workgroups where the time first
// rose by a quarter or more.
import { assemble, dawnDevice, gpuTools, matvecLaunch as launch, rng } from './gpu_timing.mjs';

const { device, hasTs } = await dawnDevice(['maxStorageBufferBindingSize', 'maxBufferSize']);
const tiny = process.argv.includes('--tiny');
const S = GPUBufferUsage.STORAGE, CD = GPUBufferUsage.COPY_DST, CS = GPUBufferUsage.COPY_SRC;
const U = GPUBufferUsage.UNIFORM;
const { mkbuf, time, readback, bound } = gpuTools(device, hasTs);
const r = rng(11);
const bytes = (n) => Uint8Array.from({ length: n }, () => (r() * 256) | 0);
const scales = (n) => Uint16Array.from({ length: n + (n & 1) }, () => 0x1c00 + ((r() * 1024) | 0));
const floats = (n) => Float32Array.from({ length: n }, () => r() * 2 - 1);
const params = (words) => mkbuf(new Uint32Array(words), U | CD);

function edit(code, from, to) {
  if (!code.includes(from)) throw new Error(`variant: text not found: ${from.slice(0, 60)}`);
  return code.split(from).join(to);
}
// the lane's blocks per step of row_reduce4.wgsl's products set to n (1 or 4) whatever the rows per lane group: the
// same additions in the same order
const blocksPerStep = (code, n) => edit(code, 'const BLOCKS_PER_STEP: u32 = select(1u, 4u, ROWS == 1u);',
  `const BLOCKS_PER_STEP: u32 = ${n}u;`);

const kernels = [];
const OLD_STAGING = 256;   // the blocks every pipeline staged before its staging was sized to its own

// the routed gate/up (moe_gate_up.wgsl, resident Q8_0 pools, x quantised ahead): 8 routed experts + the shared one
{
  const [k, rows, cols, nExp] = tiny ? [4, 64, 256, 16] : [8, 512, 2048, 256];
  const nb = cols / 32, slots = 17, { lanes, per } = launch(rows * k, nb, 2);
  const blocks = slots * rows * nb, gx = Math.ceil(rows / ((64 / lanes) * per));
  const idsBase = Math.ceil((nExp + 1) / 64) * 64, wBase = idsBase + 64;
  const route = new Uint32Array(wBase + 64);
  new Float32Array(route.buffer, 0, nExp).set(floats(nExp).map((v) => 2 * v));
  for (let i = 0; i < k; i++) route[idsBase + i] = (i * 29 + 3) % nExp;
  const xq = new Uint32Array(Math.ceil(nb * 9 / 4) * 4);
  xq.set(Uint32Array.from({ length: 8 * nb }, () => (r() * 4294967296) >>> 0));
  new Float32Array(xq.buffer, 32 * nb, nb).set(Float32Array.from({ length: nb }, () => 0.01 + r() * 0.01));
  const out = { size: 4 * (k + 1) * rows, init: null };
  const bufs = [params([rows, nb, 0, nExp, k, idsBase, wBase, slots - 1]), mkbuf(floats(cols)),
    device.createBuffer({ size: out.size, usage: S | CS }), mkbuf(bytes(blocks * 32)), mkbuf(scales(blocks)),
    mkbuf(route, S | CD), mkbuf(Uint32Array.from({ length: nExp }, (_, i) => i % (slots - 1))),
    mkbuf(bytes(blocks * 32)), mkbuf(scales(blocks)), mkbuf(xq)];
  const src = (rt, rowsPer, staged) => assemble('moe_gate_up.wgsl', { WFMT: 'q8', UFMT: 'q8', XFMT: 'q8load',
    LANES: lanes, ROUTED: 'true', ROWS: rowsPer, ROUTE: rt, STAGED_BLOCKS: staged });
  const bufsIds = [...bufs];   // ROUTE=ids reads the ids from 0 of binding 5
  bufsIds[5] = mkbuf(route.slice(idsBase, idsBase + 64), S | CD);
  const used = [0, 2, 3, 4, 5, 6, 7, 8, 9];
  for (const [rt, b, what] of [['topk', bufs, 'top-k ranked'], ['ids', bufsIds, 'ids read']]) {
    const family = `routed gate/up, ${what}`, gy = rt === 'topk' ? k + 2 : k + 1;   // the top-k: the writer's row
    kernels.push({ family, name: `${family} (engine)`, code: src(rt, per, nb), bufs: b, used, gx, gy, out });
    kernels.push({ family, name: `${family}, staging for ${OLD_STAGING} blocks`, code: src(rt, per, OLD_STAGING),
      bufs: b, used, gx, gy, out });
    if (per > 1) {   // one row per lane group: twice the workgroups, half the loads in flight per lane
      kernels.push({ family, name: `${family}, 1 row per lane group`, code: src(rt, 1, nb), bufs: b, used,
        gx: 2 * gx, gy, out });
    }
  }
}

// the routed and shared experts' down products and the block's sums (moe_down_combine.wgsl): every workgroup
// stages (quantises) all nine experts' activations for its rows
{
  const [k, rows, cols, nExp] = tiny ? [4, 64, 64, 16] : [8, 2048, 512, 256];
  const nb = cols / 32, slots = 17, blocks = slots * rows * nb, { lanes } = launch(rows, nb);
  const idsBase = Math.ceil((nExp + 1) / 64) * 64, wBase = idsBase + 64;
  const route = new Uint32Array(wBase + 64);
  new Float32Array(route.buffer, 0, nExp + 1).set(floats(nExp + 1));
  for (let i = 0; i < k; i++) route[idsBase + i] = (i * 29 + 3) % nExp;
  new Float32Array(route.buffer, 4 * wBase, k).set(Float32Array.from({ length: k }, () => 1 / k));
  const out = { size: 4 * rows, init: floats(rows) };   // h: added to in place
  const bufs = [params([rows, nb, k, 0, idsBase, wBase, slots - 1, nExp]), mkbuf(floats((k + 1) * cols)),
    mkbuf(out.init, S | CD | CS), mkbuf(bytes(blocks * 32)), mkbuf(scales(blocks)), mkbuf(route),
    mkbuf(Uint32Array.from({ length: nExp }, (_, i) => i % (slots - 1)))];
  const src = (staged) => assemble('moe_down_combine.wgsl', { WFMT: 'q8', XFMT: 'q8', LANES: lanes, ROWS: 1,
    SHARED: 'true', N_E: k + 1, STAGED_BLOCKS: staged, WG: 64 });
  const gx = Math.ceil(rows / (64 / lanes)), used = [0, 1, 2, 3, 4, 5, 6], family = 'down products + sums';
  kernels.push({ family, name: `${family} (engine)`, code: src((k + 1) * nb), bufs, used, gx, gy: 1, out });
  kernels.push({ family, name: `${family}, staging for ${OLD_STAGING} blocks`, code: src(OLD_STAGING), bufs, used, gx,
    gy: 1, out });
}

// matvec.wgsl with the RMSNorm fused: the DeltaNet input product (beta | alpha | qkv | z: 12,352 rows of 2,048)
// and a plain product at ssm_out's shape (2,048 rows of 4,096)
for (const [label, rows, cols, norm] of tiny ? [['norm fused', 512, 256, 'rms'], ['plain', 128, 512, 'none']]
  : [['DeltaNet input, norm fused', 12352, 2048, 'rms'], ['ssm_out shape, plain', 2048, 4096, 'none']]) {
  const nb = cols / 32, { lanes, per, groups } = launch(rows, nb), blocks = rows * nb;
  const eps = new Float32Array([1e-6]);
  const out = { size: 4 * rows, init: null };
  const bufs = [params([rows, nb, 0, 0, new Uint32Array(eps.buffer)[0], 0, 0, 0, 0, 0, 0, 0]), mkbuf(floats(cols)),
    device.createBuffer({ size: out.size, usage: S | CS }), mkbuf(bytes(blocks * 32)), mkbuf(scales(blocks)),
    mkbuf(floats(cols)), device.createBuffer({ size: 4 * cols, usage: S })];
  const src = (rowsPer, staged) => assemble('matvec.wgsl', { WFMT: 'q8', XFMT: 'q8', LANES: lanes, ROWS: rowsPer,
    ACCUMULATE: 'false', NORM: norm, ARGMAX: 'none', XN: 'f32', STAGED_BLOCKS: staged, WG: 64 });
  const used = norm === 'rms' ? [0, 1, 2, 3, 4, 5, 6] : [0, 1, 2, 3, 4], family = `matvec ${label}`;
  kernels.push({ family, name: `${family} (engine: ${per} rows per lane group)`, code: src(per, nb), bufs, used,
    gx: groups, gy: 1, out });
  kernels.push({ family, name: `${family}, staging for ${OLD_STAGING} blocks`, code: src(per, OLD_STAGING), bufs, used,
    gx: groups, gy: 1, out });
  const other = per === 1 ? 1 : 4;   // the engine takes 4 blocks per step with one row per lane group, else 1
  kernels.push({ family, name: `${family}, ${other} block${other > 1 ? 's' : ''} per step`,
    code: blocksPerStep(src(per, nb), other), bufs, used, gx: groups, gy: 1, out });
  for (const other of [1, 2, 4].filter((v) => v !== per)) {
    kernels.push({ family, name: `${family}, ${other} rows per lane group`, code: src(other, nb), bufs, used,
      gx: Math.ceil(groups * per / other), gy: 1, out });
  }
}

// the output head (matvec.wgsl over 248,320 rows of 2,048, its input quantised ahead by the final norm: x_stage_q8pre,
// every workgroup leaving its argmax partial): ~15.5k workgroups, many waves whatever their size; whether one block
// per lane and step (the engine's with four rows per lane group) costs it what it saves the DeltaNet input product
{
  const [rows, cols] = tiny ? [1024, 256] : [248320, 2048];
  const nb = cols / 32, { lanes, per, groups } = launch(rows, nb), blocks = rows * nb;
  const words = (n) => {   // n random 4-byte words, quickly (the head's codes are 508 MB)
    const w = new Uint32Array(n);
    for (let i = 0; i < n; i++) w[i] = (r() * 4294967296) >>> 0;
    return w;
  };
  const xq = words(Math.ceil(nb * 9 / 4) * 4);
  new Float32Array(xq.buffer, 32 * nb, nb).set(Float32Array.from({ length: nb }, () => 0.01 + r() * 0.01));
  const out = { size: 4 * rows, init: null };
  const bufs = [params([rows, nb, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), null,
    device.createBuffer({ size: out.size, usage: S | CS }), mkbuf(words(blocks * 8)), mkbuf(scales(blocks)), null,
    null, mkbuf(xq), device.createBuffer({ size: 8 * groups, usage: S })];
  const code = assemble('matvec.wgsl', { WFMT: 'q8', XFMT: 'q8pre', LANES: lanes, ROWS: per, ACCUMULATE: 'false',
    NORM: 'none', ARGMAX: 'parts', XN: 'f32', STAGED_BLOCKS: nb, WG: 64 });
  const used = [0, 2, 3, 4, 7, 8], family = 'output head';
  kernels.push({ family, name: `${family} (engine: ${per} rows per lane group)`, code, bufs, used, gx: groups, gy: 1,
    out });
  const other = per === 1 ? 1 : 4;   // the engine's other number of blocks per step, as above
  kernels.push({ family, name: `${family}, ${other} block${other > 1 ? 's' : ''} per step`,
    code: blocksPerStep(code, other), bufs, used, gx: groups, gy: 1, out });
}

// one dispatch over all of a kernel's workgroups from its output's initial values: what the variants must agree on
async function outputs(kn, pipe, bg) {
  const o = kn.bufs[2];
  if (kn.out.init) device.queue.writeBuffer(o, 0, kn.out.init);
  const e = device.createCommandEncoder(), pass = e.beginComputePass();
  pass.setPipeline(pipe); pass.setBindGroup(0, bg); pass.dispatchWorkgroups(kn.gx, kn.gy); pass.end();
  device.queue.submit([e.finish()]);
  return readback(o, kn.out.size);
}

const rise = {}, ref = {};
let warmed = false;
for (const kn of kernels) {
  const { pipe, bg } = bound(kn.code, kn.bufs, kn.used);
  const y = await outputs(kn, pipe, bg);
  let same = true;
  if (ref[kn.family]) for (let i = 0; i < y.length; i++) same &&= Object.is(y[i], ref[kn.family][i]);
  else ref[kn.family] = y;
  if (!warmed) {   // the GPU's clock rises only after some work: half a second of a kernel first
    const t0 = performance.now();
    while (performance.now() - t0 < 500) await time(pipe, bg, kn.gx, kn.gy, 3);
    warmed = true;
  }
  // W = the first gx' of each of the gy rows of workgroups (the routed gate/up: gy experts)
  const steps = kn.gx >= 32 ? 32 : kn.gx;
  let first = null;
  for (let i = 1; i <= steps; i++) {
    const gx = Math.max(1, Math.round(kn.gx * i / steps));
    const us = await time(pipe, bg, gx, kn.gy, 20);
    const w = gx * kn.gy;
    console.log(JSON.stringify({ kernel: kn.name, workgroups: w, of: kn.gx * kn.gy, us: +us.toFixed(2) }));
    if (first === null) first = { w, us };
    else if (!rise[kn.name] && us > first.us * 1.25) rise[kn.name] = { workgroups: w, us: +us.toFixed(2), from: +first.us.toFixed(2) };
  }
  console.log(JSON.stringify({ kernel: kn.name, same_as_engine: same }));
}
console.log(JSON.stringify({ rose_by_a_quarter_at: rise }));
process.exit(0);
