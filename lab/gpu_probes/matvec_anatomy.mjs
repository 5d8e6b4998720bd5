// Where a decode product's time goes. The engine's matvec.wgsl, assembled as the engine does, at the real model's
// shapes: the DeltaNet input product with its RMSNorm fused (12,352 rows of 2,048) and a plain product at ssm_out's
// shape (2,048 rows of 4,096). Its weights are cold, as the decode reads them once per token: each dispatch reads
// the next of C copies, more bytes in all than the L2 cache holds. Then they are warm (one copy, read again and
// again). Then the kernel loses its parts in turn: the norm (x normalised ahead), the staging's quantisation (x
// quantised ahead, read as is), the weights' loads (each dot on codes made from the block's index), the row groups'
// sums (each lane writes its own partial), and the staging and the weights both; and it keeps every part but
// reads its parameters from constants in its code instead of a uniform buffer; the engine's form and that one also
// after a read that flushes the L2 cache (its code, parameters and input cold too, as in a token). Each form runs at the engine's
// launch and at one workgroup per SM. The forms that keep the weights agree with the engine's outputs bit for bit
// (checked); the others are timed only. A part's cost is the engine's time minus the form without it.
//   DAWN_NODE=path/dawn.node node lab/gpu_probes/matvec_anatomy.mjs [--tiny]
// Prints one JSON line per (kernel, form, launch): µs per dispatch (R back-to-back dispatches in one pass, each
// reading what the one before wrote as the decode's do, median of repeats).
import { assemble, dawnDevice, gpuTools, matvecLaunch, rng } from './gpu_timing.mjs';

const { device, hasTs } = await dawnDevice(['maxStorageBufferBindingSize', 'maxBufferSize']);
const tiny = process.argv.includes('--tiny');
const S = GPUBufferUsage.STORAGE, CD = GPUBufferUsage.COPY_DST, CS = GPUBufferUsage.COPY_SRC;
const U = GPUBufferUsage.UNIFORM;
const { mkbuf, gpuCopies, readback, medianPassUs } = gpuTools(device, hasTs);
const r = rng(23);
const words = (n) => {
  const w = new Uint32Array(n);
  for (let i = 0; i < n; i++) w[i] = (r() * 4294967296) >>> 0;
  return w;
};
const scales = (n) => Uint16Array.from({ length: n + (n & 1) }, () => 0x1c00 + ((r() * 1024) | 0));
const floats = (n) => Float32Array.from({ length: n }, () => r() * 2 - 1);
const SMS = tiny ? 4 : 132;                  // one workgroup per SM (the H200's 132)
const COLD_BYTES = tiny ? 0 : 160 << 20;     // the copies' bytes at least: ~3x the H200's 50 MB L2 cache
const R = 24;                                // dispatches per timed pass

function edit(code, from, to) {
  if (!code.includes(from)) throw new Error(`form: text not found: ${from.slice(0, 60)}`);
  return code.split(from).join(to);
}
// the weights' loads gone: each block's dot on codes made from its index (kept live, so nothing is hoisted)
const noWeights = (code) => edit(code, 'return xq_dot(w_codes[2u * blk], w_codes[2u * blk + 1u], b, w_scale(blk));',
  'return xq_dot(vec4<u32>(blk, blk * 3u, blk ^ 0x55555555u, blk + 7u), vec4<u32>(blk * 5u), b, 1.0);');
// the row group's tree gone: every lane writes its own partial (lane 0's is stored)
const noSums = (code) => edit(code, 'let total = group_sum(acc, lid.x);', 'let total = acc;');
// the per-dispatch parameters written into the code as constants: no uniform load ahead of the addresses (the
// engine's dispatches each read their own small uniform buffer, which a token's ~1 GB of weights evicts from the
// L2 cache between two reads)
const paramsInCode = (code, values) => {
  let out = code;
  for (const [field, literal] of Object.entries(values)) out = out.split(`p.${field}`).join(literal);
  return edit(out, '@group(0) @binding(0) var<uniform> p: Params;', '');
};

// R dispatches in one pass, dispatch i on bind group i % bgs.length (each after a dispatch of `pre` where given);
// µs per dispatch (or pair), median of repeats
const timeCycle = async (pipe, bgs, gx, pre = null) => (await medianPassUs((p) => {
  for (let i = 0; i < R; i++) {
    if (pre) { p.setPipeline(pre.pipe); p.setBindGroup(0, pre.bg); p.dispatchWorkgroups(pre.gx); }
    p.setPipeline(pipe); p.setBindGroup(0, bgs[i % bgs.length]); p.dispatchWorkgroups(gx);
  }
})) / R;

// The L2 cache flushed: a read of FLUSH_BYTES before each timed dispatch evicts its code, its parameters, its input
// and its weights, as a token's other kernels do between two of its dispatches. The flush also binds the product's
// output (never written), so Dawn keeps a barrier between them; its cost is taken off with an empty kernel's.
const FLUSH_BYTES = tiny ? 1 << 20 : 128 << 20;
const flushSrc = mkbuf(new Uint32Array(FLUSH_BYTES / 4).map((_, i) => Math.imul(i, 2654435761) >>> 0));
const flushPipe = (code) => device.createComputePipeline({ layout: 'auto',
  compute: { module: device.createShaderModule({ code }), entryPoint: 'main' } });
const FLUSH = flushPipe(`
@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) ng: vec3<u32>) {
  var acc = vec4<u32>(0u);
  for (var i = gid.x; i < arrayLength(&src); i += ng.x * 256u) {
    acc ^= src[i];
  }
  if (all(acc == vec4<u32>(0x9e3779b9u))) {
    y[0] = 1.0;
  }
}`);
const EMPTY = flushPipe(`
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>) {
  if (wg.x == 0xffffffffu) {
    y[0] = 0.0;
  }
}`);

const shapes = tiny ? [['norm fused', 512, 256, 'rms'], ['plain', 128, 512, 'none']]
  : [['DeltaNet input, norm fused', 12352, 2048, 'rms'], ['ssm_out shape, plain', 2048, 4096, 'none']];
let warmed = false;
for (const [label, rows, cols, norm] of shapes) {
  const nb = cols / 32, { lanes, per, groups } = matvecLaunch(rows, nb), blocks = rows * nb;
  const eps = new Float32Array([1e-6]);
  // the weights: one random matrix, copied on the GPU into as many buffers as the cold reads need
  const codes0 = mkbuf(words(blocks * 8), S | CD | CS), scales0 = mkbuf(scales(blocks), S | CD | CS);
  const copies = Math.max(2, Math.ceil(COLD_BYTES / (blocks * 34)));
  const weights = gpuCopies([codes0, scales0], copies);
  const xq = words(Math.ceil(nb * 9 / 4) * 4);   // x quantised ahead (x_stage_q8pre.wgsl's layout)
  new Float32Array(xq.buffer, 32 * nb, nb).set(Float32Array.from({ length: nb }, () => 0.01 + r() * 0.01));
  const y = device.createBuffer({ size: 4 * rows, usage: S | CS });
  // each weight copy with its own parameters' buffer, as each of the engine's dispatches has
  const paramWords = new Uint32Array([rows, nb, 0, 0, new Uint32Array(eps.buffer)[0], 0, 0, 0, 0, 0, 0, 0]);
  const params = Array.from({ length: copies }, () => mkbuf(paramWords, U | CD));
  const bufs = [null, mkbuf(floats(cols)), y, null, null, mkbuf(floats(cols)),
    device.createBuffer({ size: 4 * cols, usage: S }), mkbuf(xq)];
  const src = (xfmt, nrm) => assemble('matvec.wgsl', { WFMT: 'q8', XFMT: xfmt, LANES: lanes, ROWS: per,
    ACCUMULATE: 'false', NORM: nrm, ARGMAX: 'none', XN: 'f32', STAGED_BLOCKS: nb, WG: 64 });
  const engine = src('q8', norm);
  const xIn = norm === 'rms' ? [1, 5, 6] : [1];
  const forms = [   // name, code, bindings used, weight copies read (0: none), compared with the engine's outputs
    ['engine, cold weights', engine, [0, ...xIn, 2, 3, 4], copies, true],
    ['engine, warm weights', engine, [0, ...xIn, 2, 3, 4], 1, true],
    ...(norm === 'rms' ? [['x normalised ahead', src('q8', 'none'), [0, 1, 2, 3, 4], copies, false]] : []),
    ['x quantised ahead', src('q8pre', 'none'), [0, 2, 3, 4, 7], copies, false],
    ['weights not read', noWeights(engine), [0, ...xIn, 2], 0, false],
    ['x quantised ahead, weights not read', noWeights(src('q8pre', 'none')), [0, 2, 7], 0, false],
    ['row sums not taken', noSums(engine), [0, ...xIn, 2, 3, 4], copies, false],
    ['parameters in the code', paramsInCode(engine, { rows: `${rows}u`, nb: `${nb}u`, x_base: '0u', y_base: '0u',
      eps: `${eps[0]}f`, xn_write: '0u', group: '0u', g_base: '0u', g_stride: '0u', part_base: '0u' }),
    [...xIn, 2, 3, 4], copies, true],
  ];
  const flush = { pipe: FLUSH, gx: tiny ? 4 : 1056, bg: device.createBindGroup({ layout: FLUSH.getBindGroupLayout(0),
    entries: [{ binding: 0, resource: { buffer: flushSrc } }, { binding: 1, resource: { buffer: y } }] }) };
  const emptyBg = device.createBindGroup({ layout: EMPTY.getBindGroupLayout(0),
    entries: [{ binding: 2, resource: { buffer: y } }] });
  const flushedForms = new Set(['engine, cold weights', 'parameters in the code']);
  let ref = null;
  for (const [form, code, used, nCopies, compare] of forms) {
    const module = device.createShaderModule({ code });
    const pipe = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
    const bgs = [];
    for (let c = 0; c < Math.max(1, nCopies); c++) {
      const b = [...bufs];
      [b[3], b[4]] = weights[c];
      b[0] = params[c];
      bgs.push(device.createBindGroup({ layout: pipe.getBindGroupLayout(0),
        entries: used.map((binding) => ({ binding, resource: { buffer: b[binding] } })) }));
    }
    if (!warmed) {   // the GPU's clock rises only after some work: half a second of a kernel first
      const t0 = performance.now();
      while (performance.now() - t0 < 500) await timeCycle(pipe, bgs, groups);
      warmed = true;
    }
    let same = null;
    if (compare) {   // one dispatch on each copy the form reads: the same outputs as the engine form's first
      for (const bg of bgs) {
        const e = device.createCommandEncoder(), p = e.beginComputePass();
        p.setPipeline(pipe); p.setBindGroup(0, bg); p.dispatchWorkgroups(groups); p.end();
        device.queue.submit([e.finish()]);
        const out = await readback(y, 4 * rows);
        if (ref === null) ref = out;
        same = (same ?? true) && out.every((v, i) => Object.is(v, ref[i]));
      }
    }
    for (const gx of [groups, Math.min(SMS, groups)]) {
      const us = await timeCycle(pipe, bgs, gx);
      console.log(JSON.stringify({ kernel: label, form, workgroups: gx, of: groups, copies: Math.max(1, nCopies),
        us: +us.toFixed(2), ...(compare ? { same_as_engine: same } : {}) }));
    }
    if (flushedForms.has(form)) {   // everything cold: its time after a flush, less an empty kernel's
      const base = await timeCycle(EMPTY, [emptyBg], groups, flush);
      const us = await timeCycle(pipe, bgs, groups, flush) - base;
      console.log(JSON.stringify({ kernel: label, form: `${form.replace(', cold weights', '')}, L2 flushed before each`,
        workgroups: groups, of: groups, copies: Math.max(1, nCopies), us: +us.toFixed(2),
        flush_and_empty_us: +base.toFixed(2) }));
    }
  }
}
process.exit(0);
