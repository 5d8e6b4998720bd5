// The decode's latency-bound kernels alone, at the real model's shape: decode attention (attention.wgsl, f16 KV,
// 16 q heads over 2 KV heads of 256, its splits as the engine records them for a given cache) and its combine at
// several cached lengths, each also in its earlier form that adds every load before it issues the next (the same
// outputs, bit for bit, expected), and the one-token DeltaNet conv + recurrence (gdn_conv_recurrent.wgsl: 32 value heads
// over 16 key heads, 128 x 128 state) with 8 value columns per workgroup (the engine's) and 32 (before). Beside
// them a dispatch that does nothing: what any dispatch costs here. The profile of `diskformer bench` times each
// dispatch in its own compute pass; these time R back-to-back dispatches in one pass, as the decode runs them.
//   DAWN_NODE=path/dawn.node node lab/gpu_probes/step_kernels.mjs [--tiny]
// Prints one JSON line per kernel and size: µs per dispatch (median of repeats); for the recurrence's other column
// count the largest difference of its outputs from the engine form's, relative to the largest |output|.
import { assemble, dawnDevice, gpuTools, rng } from './gpu_timing.mjs';

const { device, hasTs } = await dawnDevice();
const tiny = process.argv.includes('--tiny');
const S = GPUBufferUsage.STORAGE, CD = GPUBufferUsage.COPY_DST, CS = GPUBufferUsage.COPY_SRC;
const U = GPUBufferUsage.UNIFORM;
const { mkbuf, time, readback, bound } = gpuTools(device, hasTs);
const r = rng(5);
const floats = (n, s = 1) => Float32Array.from({ length: n }, () => (r() * 2 - 1) * s);
const uniform = (words) => mkbuf(new Uint32Array(words), U | CD);
const f32bits = (v) => new Uint32Array(new Float32Array([v]).buffer)[0];

const R = 20;
const report = (o) => console.log(JSON.stringify(o));

// a dispatch of one workgroup that writes one word: the cost of a dispatch (and the barrier before the next) alone
const empty = bound(`@group(0) @binding(0) var<storage, read_write> o: array<u32>;
@compute @workgroup_size(64) fn main(@builtin(local_invocation_id) l: vec3<u32>) { if (l.x == 0u) { o[0] += 1u; } }`,
[device.createBuffer({ size: 16, usage: S })]);
{   // the GPU's clock rises only after some work: half a second first
  const t0 = performance.now();
  while (performance.now() - t0 < 500) await time(empty.pipe, empty.bg, 1, 1, 50);
}
report({ kernel: 'empty dispatch (1 workgroup)', us: +(await time(empty.pipe, empty.bg, 1, 1, R)).toFixed(2) });

// decode attention and its combine (py_engine/gpu/kernels.py attention: splits = one per 64 rows the cache holds,
// at most 32; at run time the splits past the last position write neutral partials)
{
  const [nh, nkv, hd] = tiny ? [4, 2, 64] : [16, 2, 256];
  const pairs = hd / 2, maxCtx = tiny ? 256 : 4096;
  const words = (n) => Uint32Array.from({ length: n }, () => {
    const v = new Float32Array([r() * 2 - 1, r() * 2 - 1]);   // two f16 in [-1, 1): sign, exponent 14 or less
    const h = (x) => (x < 0 ? 0x8000 : 0) | (Math.abs(x) < 2 ** -14 ? 0 : ((Math.floor(Math.log2(Math.abs(x))) + 15) << 10)
      | Math.floor((Math.abs(x) / 2 ** Math.floor(Math.log2(Math.abs(x))) - 1) * 1024));
    return h(v[0]) | (h(v[1]) << 16);
  });
  const kc = mkbuf(words(maxCtx * nkv * pairs)), vc = mkbuf(words(maxCtx * nkv * pairs)), q = mkbuf(floats(nh * hd));
  const out = device.createBuffer({ size: 4 * nh * hd, usage: S | CS });
  const code = assemble('attention.wgsl', { KV: 'f16', QIN: 'ready', SPAN: 'all', VSLOTS: 1 }), combine = assemble('attention_combine.wgsl', {});
  // the loops that issue 8 loads before adding never run (their remainder loops take every term, in the same order):
  // the kernels as they were, each load added before the next is issued
  const oneAtATime = (c, loops) => loops.reduce((acc, [from, to]) => {
    if (!acc.includes(from)) throw new Error(`variant: text not found: ${from}`);
    return acc.split(from).join(to);
  }, c);
  const code1 = oneAtATime(code, [['j + 7u * KLANES < pairs;', 'j + 7u * KLANES < pairs && pairs == 0u;'],
    ['j + 7u * VSPLIT < cn;', 'j + 7u * VSPLIT < cn && cn == 0u;']]);
  const combine1 = oneAtATime(combine, [['s + 8u <= p.n_split;', 's + 8u <= p.n_split && p.n_split == 0u;']]);
  const cmp = async (buf, bytes, ref) => {
    const y = await readback(buf, bytes);
    return ref ? y.every((v, i) => Object.is(v, ref[i])) : y;
  };
  for (const [nPast, nCtx] of tiny ? [[100, 128], [200, 1024]] : [[600, 650], [600, 4096], [2000, 2048], [4000, 4096]]) {
    const splits = Math.max(1, Math.min(32, Math.ceil(nCtx / 64)));
    const parts = device.createBuffer({ size: 8 * nh * splits * (1 + pairs), usage: S | CS });
    const step = uniform([0, nPast - 1, nPast, 0]);
    const params = uniform([nh, nkv, hd, f32bits(1 / Math.sqrt(hd)), splits, 0, 0, 0, 0, 0, 0, 0]);
    let ref = null;
    for (const [form, ac, cc] of [['engine', code, combine], ['loads one at a time', code1, combine1]]) {
      const a = bound(ac, [params, step, q, kc, vc, parts]);
      const c = bound(cc, [uniform([nh, splits, pairs, 0]), parts, out]);
      const ua = await time(a.pipe, a.bg, nh, splits, R), uc = await time(c.pipe, c.bg, nh, 1, R);
      // the output of one attention + combine from these inputs: the forms must agree bit for bit
      const e = device.createCommandEncoder(), pass = e.beginComputePass();
      pass.setPipeline(a.pipe); pass.setBindGroup(0, a.bg); pass.dispatchWorkgroups(nh, splits);
      pass.setPipeline(c.pipe); pass.setBindGroup(0, c.bg); pass.dispatchWorkgroups(nh, 1); pass.end();
      device.queue.submit([e.finish()]);
      const got = await cmp(out, 4 * nh * hd, ref);
      const same = ref === null ? true : got;
      if (ref === null) ref = got;
      report({ kernel: 'attention', form, n_past: nPast, splits, workgroups: nh * splits, us: +ua.toFixed(2),
        same_as_engine: same });
      report({ kernel: 'attention_combine', form, n_past: nPast, splits, workgroups: nh, us: +uc.toFixed(2) });
    }
  }
}

// the one-token DeltaNet conv + recurrence, 8 value columns per workgroup (the engine's) and 32
{
  const [nk, nv, dk, dv, K] = tiny ? [2, 4, 32, 32, 4] : [16, 32, 128, 128, 4];
  const nCh = 2 * nk * dk + nv * dv, xBase = 2 * nv;
  const dn = floats(xBase + nCh), convW = floats(nCh * K, 0.5), win = floats(K * nCh);
  const dt = floats(nv), ssmA = Float32Array.from({ length: nv }, () => -Math.exp(r()));
  const state0 = floats(nv * dk * dv, 0.1);
  const params = new Uint32Array([nk, nv, dk, dv, 0, nk * dk, 2 * nk * dk, f32bits(1e-6), nCh, K, xBase, 0]);
  let ref = null;
  for (const cols of [8, 32]) {
    const slices = 256 / cols, maxDk = Math.ceil(dk / slices) * slices;
    const code = assemble('gdn_conv_recurrent.wgsl', { GDN_COLS: cols, MAX_DK: maxDk, GDN_OUT: 'plain' });
    const state = mkbuf(state0, S | CD | CS), out = device.createBuffer({ size: 4 * nv * dv, usage: S | CS });
    const g = bound(code, [mkbuf(params, U | CD), uniform([0, 5, 6, 0]), mkbuf(dn), mkbuf(convW), mkbuf(win),
      mkbuf(dt), mkbuf(ssmA), state, out]);
    await time(g.pipe, g.bg, Math.ceil(dv / cols), nv, 1);   // one dispatch from state0: the outputs compared
    const y = await readback(out, 4 * nv * dv);
    let err = 0, big = 0;
    if (ref) for (let i = 0; i < y.length; i++) { err = Math.max(err, Math.abs(y[i] - ref[i])); big = Math.max(big, Math.abs(ref[i])); }
    else ref = y;
    const us = await time(g.pipe, g.bg, Math.ceil(dv / cols), nv, R);
    report({ kernel: 'gdn_conv_recurrent', value_columns: cols, workgroups: Math.ceil(dv / cols) * nv, us: +us.toFixed(2),
      rel_err: big ? err / big : 0 });
  }
}
process.exit(0);
