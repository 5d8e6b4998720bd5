// The decode's routed gate/up product (shaders/moe_gate_up.wgsl over resident Q8_0 pools, 8 of 256 experts and the
// shared expert stacked as one more slot) at the real model's shape, with the router's top-k ranked by every
// workgroup (ROUTE=topk, the engine's: one more row of workgroups, the writer, takes the softmax and stores the ids
// and weights) against the same product reading the ids (ROUTE=ids: the top-k's own cost); the product's loops
// written out, x's quantisation in its earlier loop form, and the product without it or without the weights' loads;
// the product reading the ids over fewer experts (how its time scales with the work); and router_topk.wgsl alone
// (the ranking as its own dispatch). Each variant reports whether its activations and stored ids / weights are the
// engine's bit for bit (the timing-only ones compute other values); on lavapipe all are (the test requires it), on
// the H200 the written-out loops are not: the driver rounds by code shape. (The variants of the earlier ranking,
// which took the softmax in every workgroup, are timed in docs/results/2026-12-04-h200-route-topk.json.)
//   DAWN_NODE=path/dawn.node node lab/gpu_probes/route_variants.mjs [--tiny]
// Prints one JSON line per variant: µs per dispatch (back-to-back dispatches in one pass, median of repeats) and
// whether its outputs are the engine's.
import { assemble, dawnDevice, gpuTools, rng } from './gpu_timing.mjs';

const { device, hasTs } = await dawnDevice();
const tiny = process.argv.includes('--tiny');
const S = GPUBufferUsage.STORAGE, CD = GPUBufferUsage.COPY_DST, CS = GPUBufferUsage.COPY_SRC;
const U = GPUBufferUsage.UNIFORM;
const { mkbuf, time, readback, bound } = gpuTools(device, hasTs);

const [nExp, k, rows, cols] = tiny ? [16, 4, 64, 256] : [256, 8, 512, 2048];
// The pools hold 64 experts and the shared one (the ids map onto them): the bytes read are the same, and the buffers
// fit a CPU adapter's 128 MiB bindings. (The 9 experts read stay in the L2 cache across repeats, as they do not
// across the layers of a token: the loads read faster here than in the engine; the ranking's cost does not change.)
const nb = cols / 32, pooled = Math.min(nExp, 64), slots = pooled + 1, shared = pooled;
// the engine's launch shape (py_engine/gpu/kernels.py matvec_lanes, matvec_rows_per_group on a GPU adapter)
let lanes = 1;
while (lanes * 2 <= Math.min(nb, 16)) lanes *= 2;
while (lanes * 2 <= Math.min(nb, 64) && (rows * k * lanes) / 64 < 264) lanes *= 2;
const rowsPer = Math.min(2, (rows * k * lanes) / 64 / 4 >= 256 ? 4 : 1);
const perGroup = (64 / lanes) * rowsPer, gx = Math.ceil(rows / perGroup), gy = k + 1;
const gyOf = (mode) => (mode === 'topk' ? gy + 1 : gy);   // the top-k's last row: its writer (router_pick_topk.wgsl)
const idsBase = Math.ceil((nExp + 1) / 64) * 64, wBase = idsBase + Math.ceil(k / 64) * 64;

const r = rng(7);
const bytes = (n) => Uint8Array.from({ length: n }, () => (r() * 256) | 0);
const scales = (n) => Uint16Array.from({ length: n }, () => 0x1c00 + ((r() * 1024) | 0));  // f16 in [2^-8, 2^-7)
const blocks = slots * rows * nb;
const gCodes = mkbuf(bytes(blocks * 32)), gScales = mkbuf(scales(blocks));
const uCodes = mkbuf(bytes(blocks * 32)), uScales = mkbuf(scales(blocks));
const x = mkbuf(Float32Array.from({ length: cols }, () => r() * 2 - 1));
const route0 = new Uint32Array(wBase + 64);
new Float32Array(route0.buffer, 0, nExp).set(Float32Array.from({ length: nExp }, () => r() * 4 - 2));
const slotMap = mkbuf(Uint32Array.from({ length: nExp }, (_, i) => (i * 37 + 11) % pooled));
const params = (nExpP) => mkbuf(new Uint32Array([rows, nb, 0, nExpP, k, idsBase, wBase, shared]), U | CD);
const actBytes = 4 * gy * rows;

const engine = (route) => assemble('moe_gate_up.wgsl', { WFMT: 'q8', UFMT: 'q8', XFMT: 'q8', LANES: lanes, ROUTED: 'true',
  ROWS: rowsPer, ROUTE: route, STAGED_BLOCKS: nb });
function edit(code, from, to) {
  if (!code.includes(from)) throw new Error(`variant: text not found: ${from.slice(0, 60)}`);
  return code.replace(from, to);
}
// The product's loops written out for this launch shape (nb / lanes blocks per lane and row, rowsPer rows), the same
// products added in the same order: "in place" keeps each block's loads where the loop has them; "loads first" issues
// every weight load of the lane (codes and scales, gate and up) before the first product: whether the driver's
// compiled loops keep the loads in flight together (on the H200 they do: neither form is faster).
function writtenOut(code, loadsFirst) {
  const a = code.indexOf('    var b = lane;\n', code.indexOf('fn main(')), z = code.indexOf('  let total = group_sum(acc, lid.x);');
  if (a < 0 || z < 0 || nb % lanes) throw new Error('variant: the product loop of moe_gate_up.wgsl not found');
  const per = nb / lanes, loads = [], body = [];
  const blk = (i, j) => `(r${i} + lane + ${j}u * LANES)`;
  const load = (i, j) => [
    `let gc${i}_${j}a = w_codes[2u * ${blk(i, j)}]; let gc${i}_${j}b = w_codes[2u * ${blk(i, j)} + 1u];`,
    `let gs${i}_${j} = w_scale(${blk(i, j)});`,
    `let uc${i}_${j}a = u_codes[2u * ${blk(i, j)}]; let uc${i}_${j}b = u_codes[2u * ${blk(i, j)} + 1u];`,
    `let us${i}_${j} = unpack2x16float(u_scales[${blk(i, j)} >> 1u])[${blk(i, j)} & 1u];`];
  const dot = (m, i, j) => `xq_dot(${m}c${i}_${j}a, ${m}c${i}_${j}b, lane + ${j}u * LANES, ${m}s${i}_${j})`;
  const [ga, ua] = [['x', 'z'], ['y', 'w']];
  for (let i = 0; i < rowsPer; i++) loads.push(`let r${i} = (slot * p.rows + min(row0 + ${i}u, p.rows - 1u)) * p.nb;`);
  const step = (js) => {
    for (let i = 0; i < rowsPer; i++) {
      if (!loadsFirst) for (const j of js) body.push(...load(i, j));
      for (const j of js) body.push(`let g${i}_${j} = ${dot('g', i, j)};`, `let u${i}_${j} = ${dot('u', i, j)};`);
      for (const j of js) body.push(`acc.${ga[i]} += g${i}_${j};`, `acc.${ua[i]} += u${i}_${j};`);
    }
  };
  let j = 0;
  for (; j + 1 < per; j += 2) step([j, j + 1]);
  for (; j < per; j++) step([j]);
  if (loadsFirst) for (let i = 0; i < rowsPer; i++) for (let q = 0; q < per; q++) loads.push(...load(i, q));
  return code.slice(0, a) + [...loads, ...body].map((l) => `    ${l}\n`).join('') + '  }\n' + code.slice(z);
}

// Where the product's own time goes (timing only: other values): x staged without its quantisation (its loads
// kept), the weights not read (each block's dot taken on its indices), or both.
const noQuant = (code) => edit(code, '    x_store_block(b, v);', `    xq_codes[2u * b] = bitcast<vec4<u32>>(v[0]);
    xq_codes[2u * b + 1u] = bitcast<vec4<u32>>(v[1]);
    xq_scale[b] = v[2].x;`);
const noWeights = (code) => edit(edit(code, 'return xq_dot(w_codes[2u * blk], w_codes[2u * blk + 1u], b, w_scale(blk));',
  'return xq_dot(vec4<u32>(blk, arrayLength(&w_codes), arrayLength(&w_scales), 0u), vec4<u32>(b), b, 1.0);'),
  'return xq_dot(u_codes[2u * blk], u_codes[2u * blk + 1u], b, unpack2x16float(u_scales[blk >> 1u])[blk & 1u]);',
  'return xq_dot(vec4<u32>(b, arrayLength(&u_codes), arrayLength(&u_scales), 0u), vec4<u32>(blk), b, 1.0);');
// (the weights' bindings stay referenced through their lengths, so the pipeline keeps its layout)

// x's quantisation (q8_block.wgsl) in its earlier loop form (v[i], codes[i] indexed by the loop): the same operations
function quantLoops(code) {
  const a = code.indexOf('  let a = max(max(max(abs(v[0])'), z = code.indexOf('  out.d = round_to_f16(amax / 127.0);');
  if (a < 0 || z < 0) throw new Error('variant: q8_block.wgsl written out not found');
  return code.slice(0, a) + `  var amax = 0.0;
  for (var i = 0u; i < 8u; i++) {
    let a = abs(v[i]);
    amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
  }
  var inv = 0.0;
  if (amax > 0.0) {
    inv = 127.0 / amax;
  }
  var out: Q8Block;
  for (var i = 0u; i < 8u; i++) {
    out.codes[i] = pack4xI8(vec4<i32>(round(v[i] * inv)));
  }
` + code.slice(z);
}

const variants = [
  ['topk (engine)', engine('topk'), 'topk'],
  ['ids (no ranking)', engine('ids'), 'ids'],
  ['ids, loops written out, loads in place', writtenOut(engine('ids'), false), 'ids'],
  ['ids, loops written out, every load first', writtenOut(engine('ids'), true), 'ids'],
  ['topk, loops written out, every load first', writtenOut(engine('topk'), true), 'topk'],
  ['ids, x not quantised', noQuant(engine('ids')), 'ids', 'timing only'],
  ['ids, quantisation as loops', quantLoops(engine('ids')), 'ids'],
  ['topk, quantisation as loops', quantLoops(engine('topk')), 'topk'],
  ['ids, weights not read', noWeights(engine('ids')), 'ids', 'timing only'],
  ['ids, neither', noWeights(noQuant(engine('ids'))), 'ids', 'timing only'],
];

let ref = null, refRoute = null, idsRun = null;
for (const [name, code, mode, timingOnly] of variants) {
  const route = mode === 'topk' ? mkbuf(route0, S | CD | CS) : mkbuf(refRoute.slice(idsBase, idsBase + k), S | CD);
  const act = device.createBuffer({ size: actBytes, usage: S | CS });
  const { pipe, bg } = bound(code, [params(mode === 'topk' ? nExp : 0), x, act, gCodes, gScales, route, slotMap,
    uCodes, uScales]);
  await time(pipe, bg, gx, gyOf(mode), 1);   // the outputs compared below
  if (!ref) {   // the GPU's clock rises only after some work: half a second of the engine's kernel first
    const t0 = performance.now();
    while (performance.now() - t0 < 500) await time(pipe, bg, gx, gyOf(mode), 3);
  }
  const y = await readback(act, actBytes);
  let same = true;
  if (mode === 'topk') {
    const got = new Uint32Array((await readback(route, 4 * (wBase + k))).buffer);
    if (refRoute) for (let i = idsBase; i < wBase + k; i++) same &&= got[i] === refRoute[i] || (i >= idsBase + k && i < wBase);
    else refRoute = got;
  }
  if (ref) for (let i = 0; i < y.length; i++) same &&= Object.is(y[i], ref[i]);
  else ref = y;
  if (timingOnly) same = null;
  const us = await time(pipe, bg, gx, gyOf(mode), 20);
  if (mode === 'ids' && !idsRun) idsRun = { pipe, bg };
  console.log(JSON.stringify({ variant: name, experts: [k, nExp], rows, cols, lanes, rows_per_group: rowsPer,
    workgroups: gx * gyOf(mode), us: +us.toFixed(2), same_as_engine: same }));
}

// The product reading the ids over fewer experts (the first 1, 3, .. of the dispatch's rows of workgroups): how its
// time scales with the work, against a fixed chain of steps per workgroup.
for (const few of [1, 3, 5]) {
  if (few >= gy) continue;
  const us = await time(idsRun.pipe, idsRun.bg, gx, few, 20);
  console.log(JSON.stringify({ variant: `ids (no ranking), ${few} of ${gy} experts' workgroups`, workgroups: gx * few,
    us: +us.toFixed(2), same_as_engine: null }));
}

// The ranking as its own dispatch (router_topk.wgsl, one workgroup of 256, every expert ranked: the engine's where the
// ids must reach the host first, the streamed pools), for the cost of ranking once before an ids product.
{
  const ids = device.createBuffer({ size: 256, usage: S | CS }), w = device.createBuffer({ size: 256, usage: S | CS });
  const { pipe, bg } = bound(assemble('router_topk.wgsl', {}),
    [mkbuf(new Uint32Array([nExp, k, 1, 0]), U | CD), mkbuf(route0.slice(0, nExp)), ids, w]);
  await time(pipe, bg, 1, 1, 1);
  const got = new Uint32Array((await readback(ids, 4 * k)).buffer);
  const same = got.every((v, i) => v === refRoute[idsBase + i]);
  const us = await time(pipe, bg, 1, 1, 20);
  console.log(JSON.stringify({ variant: 'router_topk.wgsl alone', experts: [k, nExp], workgroups: 1, us: +us.toFixed(2),
    same_ids_as_engine: same }));
}
