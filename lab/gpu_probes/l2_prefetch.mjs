// Whether a product's weights can come into the L2 cache while the dispatch before it runs. Most of a decode
// dispatch is a latency-bound chain that moves few bytes (docs/results/2026-12-05-h200-in-pass-costs.json: ~9 µs a
// dispatch against ~2 µs of
// bytes), and a product whose weights are in the L2 cache takes less (matvec_anatomy: the DeltaNet input product
// 13.97 µs cold, 10.81 warm). So the dispatch before a product could carry extra workgroups that only read the
// product's weights (a sidecar), in its shadow. This times that without a model, at the real shapes (the DeltaNet
// input product with its norm fused, a product at ssm_out's shape; the engine's matvec.wgsl as the engine assembles
// it, its weights cold: each pair reads the next of several copies): pairs of a latency-bound dispatch (576
// workgroups each following a chain of dependent loads through the L2 cache, ~the decode's down products' length)
// and the product, with and without P sidecar workgroups in the first that read the copy the product then reads.
//   DAWN_NODE=path/dawn.node node lab/gpu_probes/l2_prefetch.mjs [--tiny]
// One JSON line per (shape, form): µs per pair or dispatch (R in one pass, each reading what the one before wrote,
// median of repeats); the gain is "pre, then product" minus "pre with sidecar, then product". Checks: the products
// give the same bits with and without the sidecar, and the sidecar read every word of the weights (the XOR of what
// its lanes loaded against the CPU's).
import { assemble, dawnDevice, gpuTools, matvecLaunch, rng } from './gpu_timing.mjs';

const { device, hasTs } = await dawnDevice(['maxStorageBufferBindingSize', 'maxBufferSize']);
const tiny = process.argv.includes('--tiny');
const S = GPUBufferUsage.STORAGE, CD = GPUBufferUsage.COPY_DST, CS = GPUBufferUsage.COPY_SRC;
const U = GPUBufferUsage.UNIFORM;
const { mkbuf, gpuCopies, readback, medianPassUs, passUs } = gpuTools(device, hasTs);
const r = rng(29);
const words = (n) => {
  const w = new Uint32Array(n);
  for (let i = 0; i < n; i++) w[i] = (r() * 4294967296) >>> 0;
  return w;
};
const R = tiny ? 4 : 24;                     // pairs per timed pass
const PRE_GROUPS = tiny ? 4 : 576;           // the latency-bound dispatch's own workgroups
const CHAIN = tiny ? 4 : 36;                 // its dependent loads per lane (~0.25 µs each through the L2 cache)
const COLD_BYTES = tiny ? 0 : 160 << 20;     // the copies' bytes at least: ~3x the H200's 50 MB L2 cache
const SIDECARS = tiny ? [4] : [264, 528, 1056];

// The dispatch before the product: PRE_GROUPS workgroups follow CHAIN dependent loads each through `next` (a 4 MB
// cycle) and write where they end (y, which the next pre reads: each pre depends on the one before). It also binds
// the product's output (dep, never written), so that Dawn keeps a barrier between it and the product on either
// side, as between the decode's dependent dispatches (otherwise the two could run at once). With SIDECAR
// workgroups after them, those read every word of the weight planes (8 loads in flight a lane: at 1,056 workgroups
// ~8.6 MB in flight, against the ~4.6 MB that 4.6 TB/s needs at the 1.0 µs memory round trip measured unloaded)
// and store the XOR of what they read (xs).
const preWgsl = (sidecar) => `
@group(0) @binding(0) var<storage, read> next: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@group(0) @binding(5) var<storage, read_write> dep: array<f32>;
${sidecar ? `@group(0) @binding(2) var<storage, read> codes: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> scales: array<u32>;
@group(0) @binding(4) var<storage, read_write> xs: array<vec4<u32>>;` : ''}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>) {
  if (wg.x < ${PRE_GROUPS}u) {
    let g = wg.x * 64u + l.x;
    var i = (y[g] + g * 7919u) % arrayLength(&next);
    for (var s = 0u; s < ${CHAIN}u; s++) {
      i = next[i];
    }
    y[g] = i;
    if (i == 0xffffffffu) {   // never (the chain's indices are below its length)
      dep[0] = 0.0;
    }
    return;
  }
${sidecar ? `  let lanes = ${sidecar}u * 64u;
  let j = (wg.x - ${PRE_GROUPS}u) * 64u + l.x;
  var acc = vec4<u32>(0u);
  let n = arrayLength(&codes);
  var i = j;
  for (; i + 7u * lanes < n; i += 8u * lanes) {
    var v: array<vec4<u32>, 8>;
    for (var u = 0u; u < 8u; u++) {
      v[u] = codes[i + u * lanes];
    }
    for (var u = 0u; u < 8u; u++) {
      acc ^= v[u];
    }
  }
  for (; i < n; i += lanes) {
    acc ^= codes[i];
  }
  for (var k = j; k < arrayLength(&scales); k += lanes) {
    acc.x ^= scales[k];
  }
  xs[j] = acc;` : ''}
}`;

function pipeline(code) {
  return device.createComputePipeline({ layout: 'auto', compute: { module: device.createShaderModule({ code }), entryPoint: 'main' } });
}
const bindGroup = (pipe, buffers) => device.createBindGroup({ layout: pipe.getBindGroupLayout(0),
  entries: Object.entries(buffers).map(([binding, buffer]) => ({ binding: +binding, resource: { buffer } })) });

const chainWords = (4 << 20) / 4, stride = 4099;   // ~16 KB apart, coprime with the size (a power of two)
const next = mkbuf(Uint32Array.from({ length: chainWords }, (_, j) => (j + stride * 16 + 1) % chainWords));
const preY = device.createBuffer({ size: 4 * PRE_GROUPS * 64, usage: S });
const print = (o) => console.log(JSON.stringify(o));

const shapes = tiny ? [['norm fused', 512, 256, 'rms'], ['plain', 128, 512, 'none']]
  : [['DeltaNet input, norm fused', 12352, 2048, 'rms'], ['ssm_out shape, plain', 2048, 4096, 'none']];
let warmed = false;
for (const [label, rows, cols, norm] of shapes) {
  const nb = cols / 32, { lanes, per, groups } = matvecLaunch(rows, nb), blocks = rows * nb;
  const codesWords = words(blocks * 8);
  const scalesWords = Uint32Array.from({ length: Math.ceil(blocks / 2) }, () => 0x1c001c00 + (((r() * 1024) | 0) << 16) + ((r() * 1024) | 0));
  const codes0 = mkbuf(codesWords, S | CD | CS), scales0 = mkbuf(scalesWords, S | CD | CS);
  const copies = Math.max(2, Math.ceil(COLD_BYTES / (blocks * 34)));
  const weights = gpuCopies([codes0, scales0], copies);
  const eps = new Float32Array([1e-6]);
  const paramWords = new Uint32Array([rows, nb, 0, 0, new Uint32Array(eps.buffer)[0], 0, 0, 0, 0, 0, 0, 0]);
  const y = device.createBuffer({ size: 4 * rows, usage: S | CS });
  const x = mkbuf(Float32Array.from({ length: cols }, () => r() * 2 - 1));
  const normW = mkbuf(Float32Array.from({ length: cols }, () => r() * 2 - 1));
  const xn = device.createBuffer({ size: 4 * cols, usage: S });
  const code = assemble('matvec.wgsl', { WFMT: 'q8', XFMT: 'q8', LANES: lanes, ROWS: per, ACCUMULATE: 'false',
    NORM: norm, ARGMAX: 'none', XN: 'f32', STAGED_BLOCKS: nb, WG: 64 });
  const product = pipeline(code);
  const used = norm === 'rms' ? [0, 1, 2, 3, 4, 5, 6] : [0, 1, 2, 3, 4];
  const productBgs = weights.map(([c, s]) => {
    const b = [mkbuf(paramWords, U | CD), x, y, c, s, normW, xn];
    return device.createBindGroup({ layout: product.getBindGroupLayout(0),
      entries: used.map((binding) => ({ binding, resource: { buffer: b[binding] } })) });
  });
  const pre = pipeline(preWgsl(0));
  const preBg = bindGroup(pre, { 0: next, 1: preY, 5: y });

  // R pairs (or lone dispatches) in one pass, pair i on weight copy i % copies; µs per pair
  const timeForm = async (record) => (await medianPassUs((p) => { for (let i = 0; i < R; i++) record(p, i % copies); })) / R;
  const preAlone = (p) => { p.setPipeline(pre); p.setBindGroup(0, preBg); p.dispatchWorkgroups(PRE_GROUPS); };
  const productOn = (p, c) => { p.setPipeline(product); p.setBindGroup(0, productBgs[c]); p.dispatchWorkgroups(groups); };

  if (!warmed) {   // the GPU's clock rises only after some work: half a second first
    const t0 = performance.now();
    while (performance.now() - t0 < (tiny ? 50 : 500)) await timeForm((p, c) => { preAlone(p); productOn(p, c); });
    warmed = true;
  }
  const outputs = async (record) => { await passUs((p) => record(p, 0)); return readback(y, 4 * rows); };
  const ref = await outputs((p, c) => { preAlone(p); productOn(p, c); });

  const base = { kernel: label, workgroups: groups, copies };
  const preUs = await timeForm((p) => preAlone(p));
  const pairUs = await timeForm((p, c) => { preAlone(p); productOn(p, c); });
  const productUs = await timeForm((p, c) => productOn(p, c));
  print({ ...base, form: 'pre alone', us: +preUs.toFixed(2) });
  print({ ...base, form: 'product alone (cold)', us: +productUs.toFixed(2) });
  print({ ...base, form: 'pre, then product', us: +pairUs.toFixed(2) });
  for (const P of SIDECARS) {
    const side = pipeline(preWgsl(P));
    const xs = device.createBuffer({ size: 16 * P * 64, usage: S | CS });
    const sideBgs = weights.map(([c, s]) => bindGroup(side, { 0: next, 1: preY, 2: c, 3: s, 4: xs, 5: y }));
    const preSide = (p, c) => { p.setPipeline(side); p.setBindGroup(0, sideBgs[c]); p.dispatchWorkgroups(PRE_GROUPS + P); };
    // the sidecar read every word: the XOR of its lanes' XORs is the weights' own
    await passUs((p) => preSide(p, 0));
    const got = new Uint32Array((await readback(xs, 16 * P * 64)).buffer);
    const want = [0, 0, 0, 0];
    codesWords.forEach((w, i) => { want[i & 3] ^= w; });
    scalesWords.forEach((w) => { want[0] ^= w; });
    const seen = [0, 0, 0, 0];
    got.forEach((w, i) => { seen[i & 3] ^= w; });
    const readAll = seen.every((v, i) => (v >>> 0) === (want[i] >>> 0));
    const same = (await outputs((p, c) => { preSide(p, c); productOn(p, c); })).every((v, i) => Object.is(v, ref[i]));
    if (!readAll || !same) {
      console.error(`${label}, ${P} sidecar workgroups: ${readAll ? '' : 'the sidecar did not read every word; '}` +
        `${same ? '' : 'the product gave other outputs after it'}`);
      process.exit(1);
    }
    const sideUs = await timeForm((p, c) => preSide(p, c));
    const sidePairUs = await timeForm((p, c) => { preSide(p, c); productOn(p, c); });
    print({ ...base, form: 'pre with sidecar', sidecar_workgroups: P, us: +sideUs.toFixed(2) });
    print({ ...base, form: 'pre with sidecar, then product', sidecar_workgroups: P, us: +sidePairUs.toFixed(2),
      gain_us: +(pairUs - sidePairUs).toFixed(2), sidecar_cost_us: +(sideUs - preUs).toFixed(2),
      product_after_sidecar_us: +(sidePairUs - sideUs).toFixed(2), product_after_pre_us: +(pairUs - preUs).toFixed(2),
      same_as_without: same, sidecar_read_every_word: readAll });
  }
}
process.exit(0);
